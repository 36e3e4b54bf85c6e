"""Forms of the web pages; the services do the domain validation, shared with the API."""

from django import forms


class PodSetForm(forms.Form):
    name = forms.CharField(max_length=63, label="Pod set")
    count = forms.IntegerField(label="Pods")
    gpus_per_pod = forms.IntegerField(label="GPUs per pod")


PodSetFormSet = forms.formset_factory(PodSetForm, extra=2, min_num=1, validate_min=True, max_num=8)
"""The gang's pod sets: the first row is filled in; the two blank rows (e.g. a launcher) are optional."""

POD_SETS_PREFIX = "pods"


def pod_set_formset(data=None) -> forms.BaseFormSet:
    return PodSetFormSet(data, prefix=POD_SETS_PREFIX, initial=[{"name": "worker", "count": 1, "gpus_per_pod": 8}])


def filled_rows(pod_sets: forms.BaseFormSet) -> list[forms.Form]:
    """The validated rows that hold a pod set, in order: `pod_sets.N` of the service is the N-th of them."""
    return [row for row in pod_sets if row.cleaned_data]


class JobSubmitForm(forms.Form):
    name = forms.CharField(max_length=200)
    queue = forms.CharField(widget=forms.Select)
    flavor = forms.CharField(widget=forms.Select)
    priority_class = forms.CharField(required=False, widget=forms.Select, label="Priority class")
    priority = forms.IntegerField(required=False, label="Raw priority (admins; overrides the class)")
    topology_required = forms.CharField(required=False, widget=forms.Select, label="Required topology")
    topology_preferred = forms.CharField(required=False, widget=forms.Select, label="Preferred topology")
    runtime_limit_s = forms.IntegerField(required=False, initial=3600, label="Runtime limit (s)")
    checkpoint_interval_s = forms.IntegerField(required=False, initial=600, label="Checkpoint interval (s)")
    preemptible = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args, queues: list[str], flavors: list[str], levels: list[str], priority_classes: list[tuple[str, str]],
                 may_set_priority: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["priority_class"].widget.choices = [("", "the default class"), *priority_classes]
        if not may_set_priority:
            del self.fields["priority"]
        self.fields["queue"].widget.choices = [(q, q) for q in queues]
        self.fields["flavor"].widget.choices = [(f, f) for f in flavors]
        level_choices = [("", "—")] + [(level, level) for level in levels]
        self.fields["topology_required"].widget.choices = level_choices
        self.fields["topology_preferred"].widget.choices = level_choices

    FIELD_OF_ERROR = {"topology.required": "topology_required", "topology.preferred": "topology_preferred"}

    def add_service_errors(self, message_dict: dict[str, list[str]], pod_sets: forms.BaseFormSet) -> None:
        """The service's errors on the fields they name: `pod_sets.1.count` on the second pod set row."""
        rows = filled_rows(pod_sets)
        for field, messages in message_dict.items():
            parts = field.split(".")
            for message in messages:
                if parts[0] == "pod_sets" and len(parts) == 3 and parts[1].isdigit() and int(parts[1]) < len(rows):
                    rows[int(parts[1])].add_error(parts[2] if parts[2] in PodSetForm.base_fields else None, message)
                elif parts[0] == "pod_sets":
                    self.add_error(None, message)
                else:
                    target = self.FIELD_OF_ERROR.get(field, field)
                    self.add_error(target if target in self.fields else None, message)

    def errors_anywhere(self, pod_sets: forms.BaseFormSet) -> bool:
        return bool(self.errors) or pod_sets.total_error_count() > 0


class ChangeForm(forms.Form):
    """A form of the queues page, one per queue and flavor (or team and flavor): ids unique on the page, the
    service's errors on the fields they name (`quotas.H100-80GB.nominal` → nominal)."""

    SERVICE_FIELDS: dict[str, str] = {}
    """The first part of a service error's path → this form's field, when its last part is not a field."""

    def __init__(self, *args, subject: str, **kwargs):
        super().__init__(*args, auto_id=f"id_{subject.replace(' ', '_')}_%s", **kwargs)
        for name, field in self.fields.items():
            field.widget.attrs.setdefault("aria-label", f"{field.label} {subject}")

    def add_service_errors(self, message_dict: dict[str, list[str]]) -> None:
        for path, messages in message_dict.items():
            last = path.rsplit(".", 1)[-1]
            field = last if last in self.fields else self.SERVICE_FIELDS.get(path.split(".", 1)[0])
            for message in messages:
                self.add_error(field, message)

    def mark_errors(self) -> None:
        """Each field with an error points to it (screen readers read it with the field); the page opens on the first."""
        errored = [name for name in self.fields if name in self.errors]
        for name in errored:
            self.fields[name].widget.attrs["aria-describedby"] = f"{self[name].auto_id}_error"
        if errored:
            self.fields[errored[0]].widget.attrs["autofocus"] = True


class QuotaForm(ChangeForm):
    nominal = forms.IntegerField(min_value=0, label="nominal", widget=forms.NumberInput(attrs={"min": 0}))
    borrowing_limit = forms.IntegerField(
        min_value=0, required=False, label="borrowing limit",
        widget=forms.NumberInput(attrs={"min": 0, "placeholder": "∞", "title": "empty: may borrow whatever the cohort lends"}))
    lending_limit = forms.IntegerField(
        min_value=0, required=False, label="lending limit",
        widget=forms.NumberInput(attrs={"min": 0, "placeholder": "all", "title": "empty: lends all its unused nominal quota"}))


class AllotmentForm(ChangeForm):
    SERVICE_FIELDS = {"allotments": "gpus"}
    gpus = forms.IntegerField(min_value=0, label="allotment", widget=forms.NumberInput(attrs={"min": 0}))
