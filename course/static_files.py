"""The static-file storage `make run` serves with (course/settings/dev.py)."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedEvenInDebugStorage(CompressedManifestStaticFilesStorage):
    """Compressed files under content-hashed names, as in production, even with DEBUG on
    (Django's manifest storage gives the plain names under DEBUG): a hashed name never changes
    its content, so whitenoise lets browsers keep it for good, and a new version is a new name."""

    def url(self, name: str | None, force: bool = False) -> str:
        return super().url(name, force=True)
