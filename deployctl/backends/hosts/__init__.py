"""Deploy: put rendered revisions on the hosts, start/stop the engine, all-or-nothing, with records."""
