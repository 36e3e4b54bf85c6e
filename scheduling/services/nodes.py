"""Node writes by admins: cordon and uncordon (no new gangs on the node; running ones stay), audited."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from scheduling.models import AuditAction, Node
from scheduling.permissions import is_admin
from scheduling.services.audit import audit_record
from scheduling.services.common import comment_check, reconcile_after_commit


@transaction.atomic
def node_cordon(*, actor, node_name: str, is_cordoned: bool, comment: str = "") -> Node:
    """Cordon (or uncordon) a node of the simulated cluster. On Kubernetes the node's `spec.unschedulable` is the
    truth and the watcher records it, so a cordon there is `kubectl cordon` (Gangway's role may not patch nodes)."""
    if not is_admin(actor):
        raise PermissionDenied("only admins cordon nodes")
    if settings.GANGWAY_CLUSTER == "kubernetes":
        raise ValidationError({"node": ["on Kubernetes, cordon with `kubectl cordon`; the watcher records it"]})
    comment_check(comment)
    node = Node.objects.select_for_update().filter(name=node_name).first()
    if node is None:
        raise Node.DoesNotExist(node_name)
    if node.is_unschedulable == is_cordoned:
        return node
    node.is_unschedulable = is_cordoned
    node.save(update_fields=["is_unschedulable", "updated_at"])
    audit_record(actor=actor, action=AuditAction.NODE_CORDON if is_cordoned else AuditAction.NODE_UNCORDON, target=node,
                 before={"is_cordoned": not is_cordoned}, after={"is_cordoned": is_cordoned}, comment=comment)
    reconcile_after_commit()
    return node
