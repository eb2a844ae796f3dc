"""The window's one owner of settings.json (after qutebrowser's Config): everyone reads the
current `Settings` from it, changes go through it, and it says which field changed.

Changes are checked by core/settings (`with_changes`): a bad value is refused with a message and
nothing changes. Saving is debounced: a burst of changes (a spin box held down) is one write,
SAVE_DELAY_MS after the last; `save_now()` writes at once (at quit).
"""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QObject, Signal

from inglenook.core.load import ModelDefaults
from inglenook.core.settings import Settings, SettingsFile, SettingsSaveError, with_changes
from inglenook.ui import tasks

SAVE_DELAY_MS = 500


class AppSettings(QObject):
    """Signals:
        changed(str): a field's value changed (its name); emitted once per field per change.
        save_failed(str): settings.json could not be written; a message for the user.
    """

    changed = Signal(str)
    save_failed = Signal(str)

    def __init__(self, settings: Settings | None = None, file: SettingsFile | None = None,
                 parent: QObject | None = None) -> None:
        """With no `settings`, they are read from `file` (its `notice` says what was
        repaired)."""
        super().__init__(parent)
        self.file = file or SettingsFile()
        self._value = settings if settings is not None else self.file.load()
        self._save = tasks.debounce(SAVE_DELAY_MS, self.save_now, self)

    @property
    def value(self) -> Settings:
        """The current settings. Read them; change them only with update() or set()."""
        return self._value

    def update(self, **changes: object) -> list[str]:
        """Change these fields together; the names that really changed (changed() fired
        for each, after all of them were applied). Raises SettingsValueError: then nothing
        changed."""
        new = with_changes(self._value, changes)
        names = [name for name in changes if getattr(new, name) != getattr(self._value, name)]
        if not names:
            return []
        self._value = new
        self._save.call()
        for name in names:
            self.changed.emit(name)
        return names

    def set(self, name: str, value: object) -> bool:
        """Change one field; whether it changed. Raises SettingsValueError."""
        return bool(self.update(**{name: value}))

    def set_load(self, **options: object) -> bool:
        """Change some load options (LoadOptions names); whether they changed (changed("load")
        fires). Raises SettingsValueError: then none of them changed."""
        return self.set("load", self._value.load.replace(**options))

    def set_model_defaults(self, path: str, defaults: ModelDefaults) -> bool:
        """This model's own defaults (empty ones remove its entry)."""
        copy = dataclasses.replace(self._value, model_defaults=dict(self._value.model_defaults))
        copy.set_defaults(path, defaults)
        return self.set("model_defaults", copy.model_defaults)

    @property
    def save_pending(self) -> bool:
        return self._save.pending

    def save_now(self) -> bool:
        """Write now (merged with what another window saved meanwhile); whether it worked.
        A failure keeps the settings here as they are and reports save_failed."""
        self._save.cancel()
        try:
            merged = self.file.save(self._value)
        except SettingsSaveError as exc:
            self.save_failed.emit(str(exc))
            return False
        old, self._value = self._value, merged
        for f in dataclasses.fields(Settings):  # what another window changed meanwhile
            if getattr(old, f.name) != getattr(merged, f.name):
                self.changed.emit(f.name)
        return True

