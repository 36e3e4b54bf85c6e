"""The reconcile pass's change log (RowChange) and the database triggers that write it, on PostgreSQL and SQLite;
explanations stored once per distinct answer (Explanation) instead of in every job row, start estimates in their
own columns; use per queue and minute beside the use per job (filled from it) and the idle jobs the usage collector
finds; indexes for the released gangs every pass reads and for today's admissions. Explanations stored in
jobs before are dropped: the next pass writes them again."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

CHANGE_TABLE = "scheduling_rowchange"
# Job columns the snapshot reads (scheduling.snapshots.JOB_FIELDS); an update of any other column (explanations,
# applied_generation) is not a change of the snapshot. A later migration that makes the snapshot read another
# column must recreate the job trigger with it.
JOB_COLUMNS = (
    "queue_id", "flavor_id", "priority", "priority_class_id", "submitted_at", "topology_required", "topology_preferred",
    "runtime_limit_s", "checkpoint_interval_s", "is_preemptible", "tolerations", "state", "admitted_at", "started_at",
    "ready_pods", "evictions", "backoff_until", "preempted_by_id", "attained_gpu_s", "admission_generation",
)
# (table, kind logged, column holding the logged id, columns whose update counts; empty: any update)
LOGGED = (
    ("scheduling_job", "job", "id", JOB_COLUMNS),
    ("scheduling_podset", "job", "job_id", ()),
    ("scheduling_placement", "job", "job_id", ()),
    ("scheduling_node", "node", "id", ()),
)


def _postgresql(table: str, kind: str, key: str, columns: tuple[str, ...]) -> list[str]:
    function = f"{table}_log_change"
    update = f"UPDATE OF {', '.join(columns)}" if columns else "UPDATE"
    return [
        f"""CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'INSERT' THEN
                INSERT INTO {CHANGE_TABLE} (kind, row_id) VALUES ('{kind}', OLD.{key});
            END IF;
            IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.{key} IS DISTINCT FROM OLD.{key}) THEN
                INSERT INTO {CHANGE_TABLE} (kind, row_id) VALUES ('{kind}', NEW.{key});
            END IF;
            RETURN NULL;
        END $$""",
        f"CREATE TRIGGER {function} AFTER INSERT OR DELETE OR {update} ON {table} FOR EACH ROW EXECUTE FUNCTION {function}()",
    ]


def _sqlite(table: str, kind: str, key: str, columns: tuple[str, ...]) -> list[str]:
    update = f"UPDATE OF {', '.join(columns)}" if columns else "UPDATE"
    log = f"INSERT INTO {CHANGE_TABLE} (kind, row_id)"
    return [
        f"CREATE TRIGGER {table}_log_insert AFTER INSERT ON {table} BEGIN {log} VALUES ('{kind}', NEW.{key}); END",
        f"CREATE TRIGGER {table}_log_delete AFTER DELETE ON {table} BEGIN {log} VALUES ('{kind}', OLD.{key}); END",
        f"CREATE TRIGGER {table}_log_update AFTER {update} ON {table} BEGIN {log} VALUES ('{kind}', OLD.{key}); "
        f"{log} SELECT '{kind}', NEW.{key} WHERE NEW.{key} IS NOT OLD.{key}; END",
    ]


def triggers_create(apps, schema_editor):
    build = {"postgresql": _postgresql, "sqlite": _sqlite}.get(schema_editor.connection.vendor)
    if build is None:
        return  # other databases: no log, and snapshot_cache reads every pass in full
    for logged in LOGGED:
        for statement in build(*logged):
            schema_editor.execute(statement)


def queue_rollups_fill(apps, schema_editor):
    """The queues' rollups of the use already recorded per job, so the charts keep their history."""
    UsageRollup, QueueUsageRollup = apps.get_model("scheduling", "UsageRollup"), apps.get_model("scheduling", "QueueUsageRollup")
    sums = UsageRollup.objects.values("start", "bucket_s", "team_id", "queue_id", "flavor_id").annotate(
        allocated=models.Sum("allocated_gpu_s"), used=models.Sum("used_gpu_s")).order_by()
    QueueUsageRollup.objects.bulk_create(
        (QueueUsageRollup(start=row["start"], bucket_s=row["bucket_s"], team_id=row["team_id"], queue_id=row["queue_id"],
                          flavor_id=row["flavor_id"], allocated_gpu_s=row["allocated"], used_gpu_s=row["used"]) for row in sums.iterator()),
        batch_size=2000,
    )


def triggers_drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for table, *_ in LOGGED:
        if vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_log_change ON {table}")
            schema_editor.execute(f"DROP FUNCTION IF EXISTS {table}_log_change()")
        elif vendor == "sqlite":
            for event in ("insert", "delete", "update"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_log_{event}")


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0008_merge_session9c'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Explanation',
            fields=[
                ('key', models.CharField(max_length=48, primary_key=True, serialize=False)),
                ('data', models.JSONField()),
                ('fingerprint', models.CharField(max_length=16)),
                ('checked_at', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='RowChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(help_text='"job" (a job, its pod sets or placements) or "node".', max_length=8)),
                ('row_id', models.BigIntegerField()),
                ('pass_number', models.PositiveBigIntegerField(blank=True, null=True)),
            ],
        ),
        migrations.RemoveField(
            model_name='job',
            name='explanation',
        ),
        migrations.RemoveField(
            model_name='job',
            name='explanation_fingerprint',
        ),
        migrations.AddField(
            model_name='job',
            name='estimated_at',
            field=models.DateTimeField(blank=True, help_text='When that forecast ran.', null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='estimated_start',
            field=models.DateTimeField(blank=True, help_text='When the forecast expects a pending job to start.', null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='explanation_key',
            field=models.CharField(blank=True, default='', help_text='Key of the stored explanation of a pending job (Explanation): shared by the jobs of one shape.', max_length=48),
        ),
        migrations.AddField(
            model_name='queueusage',
            name='pending_gpus',
            field=models.JSONField(blank=True, default=dict, help_text='{flavor: GPUs} of the queue\'s pending jobs.'),
        ),
        migrations.AddField(
            model_name='reconcilestate',
            name='fleet_summary',
            field=models.JSONField(blank=True, default=dict, help_text='Totals per flavor and rack and the free-GPU heatmap, as the last pass that saw them change left them.'),
        ),
        migrations.AddField(
            model_name='reconcilestate',
            name='explanations_version',
            field=models.PositiveBigIntegerField(default=0, help_text='Bumped by every pass that writes explanations: a process that remembers an older version reads them again.'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('applied_generation__gt', 0)), fields=['state'], name='job_released'),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('admitted_at__isnull', False)), fields=['admitted_at'], name='job_admitted_at'),
        ),
        migrations.AddIndex(
            model_name='jobevent',
            index=models.Index(fields=['to_state', 'created_at'], name='jobevent_state_created'),
        ),
        migrations.AddIndex(
            model_name='rowchange',
            index=models.Index(fields=['pass_number'], name='rowchange_pass'),
        ),
        migrations.CreateModel(
            name='IdleJob',
            fields=[
                ('job', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='idle', serialize=False, to='scheduling.job')),
                ('mean_util_percent', models.FloatField()),
            ],
        ),
        migrations.CreateModel(
            name='QueueUsageRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField()),
                ('bucket_s', models.PositiveIntegerField()),
                ('allocated_gpu_s', models.FloatField()),
                ('used_gpu_s', models.FloatField()),
                ('flavor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='scheduling.flavor')),
                ('queue', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='scheduling.queue')),
                ('team', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='scheduling.team')),
            ],
            options={
                'ordering': ['start'],
                'indexes': [models.Index(fields=['start', 'bucket_s'], name='queue_rollup_start')],
            },
        ),
        migrations.RunPython(triggers_create, triggers_drop),
        migrations.RunPython(queue_rollups_fill, migrations.RunPython.noop),
    ]
