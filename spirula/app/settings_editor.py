"""The "All options" editor: a form generated from the settings table (spirula/engine/settings.py),
one row per setting, basic ones first, each with its help as the tooltip. It edits a full
set of settings (name -> value) and gives it back checked, so what it shows is exactly what
the run gets (floats are shown and read back exactly)."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from spirula.engine import settings as table


class SettingsEditor(QtWidgets.QDialog):
    """Every setting of the table; :meth:`set_values` / :meth:`values` (ValueError naming
    the setting for a bad entry). Accepting it with a bad entry says why and stays open."""

    def __init__(self, values: dict | None = None, parent=None):
        super().__init__(parent)
        self.setWindowTitle("All training options")
        self.setObjectName("settings-editor")
        lay = QtWidgets.QVBoxLayout(self)
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        inner = QtWidgets.QWidget()
        form = QtWidgets.QFormLayout(inner)
        self.widgets: dict[str, QtWidgets.QWidget] = {}
        for group in table.GROUPS:
            head = QtWidgets.QLabel(f"<b>{'Basic' if group == 'basic' else 'Advanced'}</b>")
            form.addRow(head)
            for s in table.SETTINGS:
                if s.group != group:
                    continue
                w = self._widget(s)
                w.setToolTip(f"{s.option}: {s.help}" + ("" if s.retrains else " (changing it does not train again)"))
                w.setObjectName(f"setting-{s.name}")
                self.widgets[s.name] = w
                form.addRow(s.title, w)
        scroll.setWidget(inner)
        lay.addWidget(scroll, 1)
        self.error = QtWidgets.QLabel("")
        self.error.setWordWrap(True)
        lay.addWidget(self.error)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel
                                             | QtWidgets.QDialogButtonBox.StandardButton.RestoreDefaults)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        buttons.button(QtWidgets.QDialogButtonBox.StandardButton.RestoreDefaults).clicked.connect(
            lambda: self.set_values({s.name: s.default for s in table.SETTINGS}))
        lay.addWidget(buttons)
        self.resize(560, 640)
        self.set_values({s.name: s.default for s in table.SETTINGS} | (values or {}))

    @staticmethod
    def _widget(s: table.Setting) -> QtWidgets.QWidget:
        if s.type is bool:
            return QtWidgets.QCheckBox()
        if s.choices:
            box = QtWidgets.QComboBox()
            for c in s.choices:
                box.addItem(str(c), c)
            return box
        return QtWidgets.QLineEdit()

    def set_values(self, values: dict) -> None:
        """Show ``values`` (unknown names ignored, missing ones left as they are)."""
        for name, v in values.items():
            w, s = self.widgets.get(name), table.BY_NAME.get(name)
            if w is None or v is None:
                continue
            if isinstance(w, QtWidgets.QCheckBox):
                w.setChecked(bool(v))
            elif isinstance(w, QtWidgets.QComboBox):
                w.setCurrentIndex(max(w.findData(v), 0))
            else:
                w.setText(s.text(v))

    def values(self) -> dict:
        """Every setting as entered, checked (ValueError "<name>: <why>" for a bad one)."""
        out = {}
        for s in table.SETTINGS:
            w = self.widgets[s.name]
            if isinstance(w, QtWidgets.QCheckBox):
                out[s.name] = w.isChecked()
            elif isinstance(w, QtWidgets.QComboBox):
                out[s.name] = w.currentData()
            else:
                text = w.text()
                try:
                    out[s.name] = s.parse(text.split() if s.type is tuple else text)
                except ValueError as e:
                    raise ValueError(f"{s.title} ({s.option}): {e}") from None
        return out

    def _accept(self) -> None:
        try:
            self.values()
        except ValueError as e:
            self.error.setText(str(e))
            return
        self.accept()


def edit(parent, values: dict, done) -> SettingsEditor:
    """Open the editor on ``values`` (window-modal, not blocking); ``done(values)`` on OK."""
    dlg = SettingsEditor(values, parent)
    dlg.setWindowModality(QtCore.Qt.WindowModality.WindowModal)
    dlg.accepted.connect(lambda: done(dlg.values()))
    dlg.open()
    return dlg
