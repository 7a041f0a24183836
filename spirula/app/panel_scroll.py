"""A panel of the right-hand docks in a vertical scroll area, so the window fits a small
screen: the Training panel alone needs ~820 px, which made the window 951 px tall, its
bottom off a 768 or 900 px screen.

Not QScrollArea's widgetResizable: the panels' word-wrapped labels make it size a panel by
its preferred height (every plot at its 480 px hint), so a panel scrolled even where it
fitted. Here a panel fills the height it is given and scrolls only below its minimum."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets


class PanelScroll(QtWidgets.QScrollArea):
    def __init__(self, panel: QtWidgets.QWidget, parent=None):
        super().__init__(parent)
        self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(panel)
        self.bar = self.style().pixelMetric(QtWidgets.QStyle.PixelMetric.PM_ScrollBarExtent)
        self.setMinimumWidth(panel.minimumSizeHint().width() + self.bar)  # as wide as before: no sideways scroll
        panel.installEventFilter(self)

    def fit(self) -> None:
        panel = self.widget()
        need = panel.minimumSizeHint().height()
        width = self.width() - (self.bar if need > self.height() else 0)
        panel.resize(max(width, 1), max(self.height(), need))

    def resizeEvent(self, ev):  # noqa: N802 (Qt name)
        super().resizeEvent(ev)
        self.fit()

    def eventFilter(self, obj, ev) -> bool:  # noqa: N802
        if ev.type() == QtCore.QEvent.Type.LayoutRequest:  # rows came or went: its minimum changed
            QtCore.QTimer.singleShot(0, self.fit)
        return False
