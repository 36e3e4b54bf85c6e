"""Query-string filters of the job list (django-filter); invalid values give 400."""

import django_filters

from scheduling.core.model import JobState
from scheduling.models import Job
from scheduling.selectors.jobs import owner_ids, queue_ids


class JobFilter(django_filters.FilterSet):
    queue = django_filters.CharFilter(method="filter_queue")
    team = django_filters.CharFilter(method="filter_team")
    state = django_filters.ChoiceFilter(choices=[(s.value, s.value) for s in JobState])
    owner = django_filters.CharFilter(method="filter_owner")

    class Meta:
        model = Job
        fields = ["queue", "team", "state", "owner"]

    def filter_queue(self, queryset, name, value):
        return queryset.filter(queue_id__in=queue_ids(name=value))

    def filter_team(self, queryset, name, value):
        return queryset.filter(queue_id__in=queue_ids(team=value))

    def filter_owner(self, queryset, name, value):
        # Only jobs whose owner the asking user may see: hidden owners are never matched.
        return queryset.filter(owner_id__in=owner_ids(username=value), is_visible_in_full=True)
