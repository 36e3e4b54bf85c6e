"""Server-rendered pages, one module per area: jobs, queues, teams, fleet (and what they share: parts)."""
