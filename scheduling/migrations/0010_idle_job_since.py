import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    """IdleJob.since: when the job went idle, not its admission. Rows present now start at the migration's time, later
    than the truth, so a preemption's cost is overstated until the job next goes idle, never understated."""

    dependencies = [("scheduling", "0009_scale_snapshot_cache")]

    operations = [
        migrations.AddField(
            model_name="idlejob",
            name="since",
            field=models.DateTimeField(
                default=django.utils.timezone.now,
                help_text="The start of the first grace period in which the collection found the job idle, kept while it "
                          "stays idle: the work before it is the job's, the time after it is not (core.idle).",
            ),
            preserve_default=False,
        ),
    ]
