"""Fair-share accounts: one per team, whatever the number of its queues (more queues are not more weight).

The order across queues (core.fairshare) compares dominant shares and decayed usage. Taken per queue, a team
that spreads its jobs over four queues would get four places in that order, each with a quarter of its usage
history. An account sums its team's queues instead:

    share(team)       = max over its queues' cohorts c and flavors f of  Σ borrowed_f of its queues in c / pool_{c,f},
                        divided by weight(team)
    history(team)     = Σ its queues' decayed usage (GPU-seconds held, idle or not) / entitlement(team)
    weight(team)      = its queues' weights averaged over their nominal quotas (a queue without quota weighs nothing)
    entitlement(team) = weight(team) × its queues' nominal GPUs (at least one), as fairshare.entitlement is per queue

Every queue of the team then ranks by its account, and its own head job
only breaks ties, so a team's queues interleave FIFO inside one account. With one queue per team this is
exactly the per-queue order.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduling.core.attained import NO_SERVICE_ORDER, ServiceOrder
from scheduling.core.fairshare import order_key
from scheduling.core.model import Job, Queue
from scheduling.core.quota import QuotaLedger, cohort_of


class FairShareAccounts:
    def __init__(self, queues: Mapping[str, Queue], historical_usage: Mapping[str, float]) -> None:
        self.members: dict[str, list[Queue]] = {}
        for queue in queues.values():
            self.members.setdefault(queue.team, []).append(queue)
        self.history: dict[str, float] = {}
        self.weight: dict[str, float] = {}
        self.entitlement: dict[str, float] = {}
        for team, members in self.members.items():
            self.history[team] = sum(historical_usage.get(q.name, 0.0) for q in members)
            self.weight[team] = account_weight(members)
            nominal = sum(quota.nominal for queue in members for quota in queue.quotas.values())
            self.entitlement[team] = self.weight[team] * max(nominal, 1)

    def share(self, team: str, ledger: QuotaLedger) -> float:
        """The team's dominant share of what its cohorts lend, divided by its weight."""
        borrowed: dict[tuple[str, str], int] = {}
        for queue in self.members[team]:
            for flavor in queue.quotas:
                key = (cohort_of(queue), flavor)
                borrowed[key] = borrowed.get(key, 0) + ledger.borrowed(queue, flavor)
        share = 0.0
        for key, gpus in borrowed.items():
            pool = ledger.pool_size.get(key, 0)
            if gpus and pool:
                share = max(share, gpus / pool)
        return share / self.weight[team]

    def weighted_history(self, team: str) -> float:
        return self.history[team] / self.entitlement[team]


def account_weight(members: list[Queue]) -> float:
    nominal = [sum(quota.nominal for quota in queue.quotas.values()) for queue in members]
    total = sum(nominal)
    if total:
        weight = sum(queue.weight * gpus for queue, gpus in zip(members, nominal)) / total
    else:
        weight = sum(queue.weight for queue in members) / len(members)
    return max(weight, 1e-9)


def account_order_key(queue: Queue, accounts: FairShareAccounts, ledger: QuotaLedger, head: Job,
                      service: ServiceOrder = NO_SERVICE_ORDER, *, last: bool = False) -> tuple:
    """Lowest first: the team's share, then its faded history, then the queue's head job (as fairshare.queue_order_key)."""
    return order_key(accounts.share(queue.team, ledger), accounts.weighted_history(queue.team), queue.name, head, service,
                     last=last)
