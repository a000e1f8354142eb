"""`deployctl watch`: read every node of a deployment each round, name failed or hung instances, and (if the
inventory's deploy.recovery says so) take them out of the router, restart them and put them back."""
