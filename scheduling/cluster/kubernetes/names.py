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
PRIORITY_CLASS_LABEL = "gangway.dev/priority-class"

# Kueue's labels, read as synonyms of Gangway's own so that workloads labelled for Kueue need no edit.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_LABELS = (QUEUE_LABEL, KUEUE_QUEUE_LABEL)
"""Gangway's first: a workload carrying both is in the queue Gangway's label names."""
PRIORITY_CLASS_LABELS = (PRIORITY_CLASS_LABEL, KUEUE_PRIORITY_CLASS_LABEL)

# Written by Gangway when it releases a gang.
ADMISSION_GATE = "gangway.dev/admission"
GENERATION_ANNOTATION = "gangway.dev/admission-generation"
PLACEMENT_ANNOTATION = "gangway.dev/placement"
JOB_ID_ANNOTATION = "gangway.dev/job-id"
MANAGED_LABEL = "gangway.dev/managed"
"""On the pod template of released workloads, so one label selector lists every managed pod."""

# Written by the Job controller (also on the pods of a JobSet's child Jobs).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

# Written by the JobSet controller on its child Jobs and their pods.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"

# Written by the Kubeflow Training Operator on the pods of a PyTorchJob.
TRAINING_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
"""The replica type lower-cased ("master", "worker"), as the operator writes it."""
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
