from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0004_merge_session9a"),
    ]

    operations = [
        migrations.AddField(
            model_name="reconcilestate",
            name="cluster_errors",
            field=models.PositiveBigIntegerField(default=0, help_text="Releases and suspensions the cluster refused (retried)."),
        ),
        migrations.AddField(
            model_name="reconcilestate",
            name="last_pass_phases_s",
            field=models.JSONField(blank=True, default=dict, help_text="Seconds of each step of the last pass."),
        ),
    ]
