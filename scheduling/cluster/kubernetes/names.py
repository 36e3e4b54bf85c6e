"""The label, annotation and scheduling-gate names Gangway reads and writes in a Kubernetes cluster."""

GPU_RESOURCE = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"

# Written by users on the workloads they hand to Gangway.
QUEUE_LABEL = "gangway.dev/queue"
PRIORITY_ANNOTATION = "gangway.dev/priority"
FLAVOR_ANNOTATION = "gangway.dev/flavor"
TOPOLOGY_REQUIRED_ANNOTATION = "gangway.dev/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = "gangway.dev/topology-preferred"
RUNTIME_LIMIT_ANNOTATION = "gangway.dev/runtime-limit-seconds"
CHECKPOINT_INTERVAL_ANNOTATION = "gangway.dev/checkpoint-interval-seconds"
PREEMPTIBLE_ANNOTATION = "gangway.dev/preemptible"

# Written by Gangway when it releases a gang.
ADMISSION_GATE = "gangway.dev/admission"
GENERATION_ANNOTATION = "gangway.dev/admission-generation"
PLACEMENT_ANNOTATION = "gangway.dev/placement"
JOB_ID_ANNOTATION = "gangway.dev/job-id"
MANAGED_LABEL = "gangway.dev/managed"
"""On the pod template of released workloads, so one label selector lists every managed pod."""

# Written by the Job controller.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
