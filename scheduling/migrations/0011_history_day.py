from django.db import migrations, models


class Migration(migrations.Migration):
    """HistoryDay: the history page's ended days, computed once and shared by every web worker (they were cached per
    process, so each restarted worker read a week of events again). Empty at first: the first view fills it."""

    dependencies = [
        ('scheduling', '0010_idle_job_since'),
    ]

    operations = [
        migrations.CreateModel(
            name='HistoryDay',
            fields=[
                ('day', models.DateField(primary_key=True, serialize=False)),
                ('rows', models.JSONField(help_text='[{queue, admissions, preemptions, p50_wait_s, p95_wait_s}], by queue name')),
            ],
        ),
    ]
