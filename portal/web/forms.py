"""Forms of the web pages; the services do the domain validation, shared with the API."""

from django import forms


class JobSubmitForm(forms.Form):
    name = forms.CharField(max_length=200)
    queue = forms.CharField(widget=forms.Select)
    flavor = forms.CharField(widget=forms.Select)
    pod_set_name = forms.CharField(max_length=63, initial="worker", label="Pod set name")
    count = forms.IntegerField(initial=1, label="Pods", help_text="pods in the gang; all start together or none")
    gpus_per_pod = forms.IntegerField(initial=8, label="GPUs per pod")
    priority = forms.IntegerField(initial=0)
    topology_required = forms.CharField(required=False, widget=forms.Select, label="Required topology")
    topology_preferred = forms.CharField(required=False, widget=forms.Select, label="Preferred topology")
    runtime_limit_s = forms.IntegerField(required=False, initial=3600, label="Runtime limit (s)")
    checkpoint_interval_s = forms.IntegerField(required=False, initial=600, label="Checkpoint interval (s)")
    preemptible = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args, queues: list[str], flavors: list[str], levels: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["queue"].widget.choices = [(q, q) for q in queues]
        self.fields["flavor"].widget.choices = [(f, f) for f in flavors]
        level_choices = [("", "—")] + [(level, level) for level in levels]
        self.fields["topology_required"].widget.choices = level_choices
        self.fields["topology_preferred"].widget.choices = level_choices

    FIELD_OF_ERROR = {
        "pod_sets.0.name": "pod_set_name",
        "pod_sets.0.count": "count",
        "pod_sets.0.gpus_per_pod": "gpus_per_pod",
        "topology.required": "topology_required",
        "topology.preferred": "topology_preferred",
    }

    def add_service_errors(self, message_dict: dict[str, list[str]]) -> None:
        for field, messages in message_dict.items():
            target = self.FIELD_OF_ERROR.get(field, field)
            for message in messages:
                self.add_error(target if target in self.fields else None, message)


class QuotaForm(forms.Form):
    nominal = forms.IntegerField(min_value=0)
    borrowing_limit = forms.IntegerField(min_value=0, required=False)
    lending_limit = forms.IntegerField(min_value=0, required=False)
