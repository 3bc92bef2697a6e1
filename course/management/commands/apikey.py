"""`manage.py apikey create --user NAME [--name NAME]`: an API key for /v1, printed alone on
the last line (so scripts can take it with `tail -n 1`); `apikey revoke --user NAME --prefix P`
revokes the one active key whose prefix (as `list` prints it, part of it, or the key itself)
matches P, and refuses a P that matches several or none; `apikey list --user NAME` lists them."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from course.api_keys import TooManyKeys, api_key_create, api_key_revoke, api_keys_for


class Command(BaseCommand):
    help = "Make, list or revoke a learner's API keys for the OpenAI-compatible API at /v1."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["create", "list", "revoke"])
        parser.add_argument("--user", required=True, help="the username the key belongs to")
        parser.add_argument("--name", default="operator", help="a name for the new key")
        parser.add_argument("--prefix", help="revoke: the keys starting with this")

    def handle(self, *args, action: str, user: str, name: str, prefix: str | None, **options):
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(f"no user named {user!r}")
        if action == "create":
            try:
                key, raw = api_key_create(user=account, name=name)
            except TooManyKeys as exc:
                raise CommandError(str(exc)) from None
            self.stderr.write(f"Key {key.name!r} for {user}; shown once, stored hashed:")
            self.stdout.write(raw)
        elif action == "list":
            for key in api_keys_for(user=account):
                state = "active" if key.is_active else "revoked"
                self.stdout.write(f"{key.prefix}…  {key.name}  {state}")
        else:
            if not prefix:
                raise CommandError("revoke needs --prefix")
            prefix = prefix.rstrip("…")
            # The stored prefix, part of it, or the key itself (which starts with it); a string
            # that several keys match (such as "sk-course-") revokes none of them.
            keys = [k for k in api_keys_for(user=account) if k.is_active and
                    (k.prefix.startswith(prefix) or prefix.startswith(k.prefix))]
            if len(keys) != 1:
                shown = ", ".join(k.prefix for k in keys)
                raise CommandError(
                    f"{prefix!r} matches {len(keys)} active keys{': ' + shown if shown else ''}; "
                    "give the whole prefix `apikey list` prints (or the key itself)")
            api_key_revoke(user=account, key_id=keys[0].pk)
            self.stdout.write(f"revoked key {keys[0].prefix}… ({keys[0].name})")
