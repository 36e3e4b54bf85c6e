"""The scheduling domain: models, services, selectors, the reconcile pass, tasks and cluster adapters."""
