"""`manage.py bench live`: the live product (pass, pages, API, submit) at fleet scale in a real database.

Unlike `scheduling.benchmarks` (the pure core, no Django), this package drives the ORM, a real web server
and the reconcile pass, so it lives outside the benchmarks' no-Django contract."""
