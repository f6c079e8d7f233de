from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobqueue", "0004_schedule"),
    ]

    operations = [
        # Nullable, no default: PostgreSQL adds the column without rewriting the table, and a
        # worker of the previous version, whose insert does not name it, leaves it NULL.
        migrations.AddField(
            model_name="job",
            name="trace_context",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
