from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('course', '0003_practice'),
    ]

    operations = [
        migrations.AddField(
            model_name='practiceattempt',
            name='nonce',
            field=models.CharField(blank=True, db_index=True, max_length=32),
        ),
    ]
