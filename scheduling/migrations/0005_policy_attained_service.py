from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0004_merge_session9a"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="attained_gpu_s",
            field=models.FloatField(
                default=0.0,
                help_text="GPU-seconds run in earlier runs (before a preemption or eviction): the attained service.",
            ),
        ),
    ]
