"""Planning on virtual time from a live snapshot: start estimates (forecast) and quota what-ifs (what_if).

Pure like the core (no Django, no I/O; import-linter keeps it so): the services run it on the snapshot of the database,
the benchmarks and tests on built snapshots. It drives the same run_admission_cycle as the reconcile pass and the
simulator, so an estimate is what the pass would do if nothing new arrived.
"""
