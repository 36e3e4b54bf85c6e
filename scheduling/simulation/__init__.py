"""The scheduling core on virtual time: trace replays, policy comparisons (pure: no Django, no I/O frameworks).

    python -m scheduling.simulation --trace philly --scale 0.25 --policy fifo-isolated,kueue-like,gangway,sjf-oracle

See docs/simulation.md.
"""
