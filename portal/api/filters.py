"""Query-string parameters of the job list (django-filter): declared here so bad values give 400 and the OpenAPI
schema lists them; applied by selectors.jobs_filter, the filter the web list uses too."""

import django_filters

from scheduling.core.model import JobState
from scheduling.models import Job
from scheduling.selectors.jobs import jobs_filter


class JobFilter(django_filters.FilterSet):
    queue = django_filters.CharFilter()
    team = django_filters.CharFilter()
    state = django_filters.ChoiceFilter(choices=[(s.value, s.value) for s in JobState])
    owner = django_filters.CharFilter()

    class Meta:
        model = Job
        fields = ["queue", "team", "state", "owner"]

    def filter_queryset(self, queryset):
        return jobs_filter(queryset, **self.form.cleaned_data)
