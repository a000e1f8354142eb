"""The read-only probes as facts (fact.Fact): the command a host runs and the parser of its answer, text in,
fact models out; one module per area, all listed in catalog.FACTS."""
