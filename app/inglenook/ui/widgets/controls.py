"""Small reusable widgets: a slider bound to a spin box, collapsible sections, helper text.

The controls here only take wheel events once they have focus: the side panel scrolls, and a
slider that grabs the wheel while the user scrolls past it silently changes a setting.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtGui import QFont, QPalette, QWheelEvent
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QDoubleSpinBox,
    QFrame,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inglenook.core.sampling import ParamSpec
from inglenook.ui.plain import plain_label
from inglenook.ui.widgets.narrow import ElidingToolButton


class _WheelWhenFocused:
    """Mixin: pass wheel events on to the scroll area unless the control has focus."""

    def _init_wheel(self) -> None:
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # type: ignore[attr-defined]

    def wheelEvent(self, event: QWheelEvent) -> None:
        if self.hasFocus():  # type: ignore[attr-defined]
            super().wheelEvent(event)  # type: ignore[misc]
        else:
            event.ignore()


class SpinBox(_WheelWhenFocused, QSpinBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._init_wheel()


class DoubleSpinBox(_WheelWhenFocused, QDoubleSpinBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._init_wheel()


class Slider(_WheelWhenFocused, QSlider):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self._init_wheel()


class ComboBox(_WheelWhenFocused, QComboBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._init_wheel()


SPIN_WIDTH = 92


class SliderSpin(QObject):
    """A label, a slider and a spin box showing one ParamSpec value, kept in step.

    The spin box holds the value; the slider is a coarse view of it. Floats map onto the
    integer slider at the spec's decimal resolution, so every value the spin box can show
    has a slider position.

    Signals:
        value_changed(float): the value changed, by the user or by set_value().
    """

    value_changed = Signal(float)

    def __init__(self, spec: ParamSpec, *, slider: bool = True,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.is_int = spec.decimals == 0
        self._scale = 10**spec.decimals
        self.label = QLabel(spec.label, parent)
        self.label.setObjectName(f"{spec.name}_label")
        self.spin: QSpinBox | QDoubleSpinBox
        if self.is_int:
            self.spin = SpinBox(parent)
            self.spin.setRange(int(spec.minimum), int(spec.maximum))
            self.spin.setSingleStep(int(spec.step))
        else:
            self.spin = DoubleSpinBox(parent)
            self.spin.setDecimals(spec.decimals)
            self.spin.setRange(spec.minimum, spec.maximum)
            self.spin.setSingleStep(spec.step)
        self.spin.setObjectName(f"{spec.name}_spin")
        self.spin.setSpecialValueText(spec.special_value_text)
        self.spin.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.spin.setFixedWidth(SPIN_WIDTH)
        self.spin.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToNearestValue)
        self.slider: QSlider | None = None
        if slider:
            self.slider = Slider(parent)
            self.slider.setObjectName(f"{spec.name}_slider")
            self.slider.setRange(self._to_pos(spec.minimum), self._to_pos(spec.maximum))
            step = max(1, self._to_pos(spec.minimum + spec.step) - self._to_pos(spec.minimum))
            self.slider.setSingleStep(step)
            self.slider.setPageStep(step * 10)
            self.slider.valueChanged.connect(self._on_slider)
        self.spin.valueChanged.connect(self._on_spin)
        self.spin.setAccessibleName(spec.label)
        if self.slider is not None:
            self.slider.setAccessibleName(f"{spec.label} slider")
        self.set_tooltip(spec.tooltip)

    def _to_pos(self, value: float) -> int:
        return round(value * self._scale)

    def widgets(self) -> list[QWidget]:
        return [w for w in (self.label, self.spin, self.slider) if w is not None]

    def value(self) -> float:
        return float(self.spin.value())

    def set_value(self, value: float) -> None:
        self.spin.setValue(int(value) if self.is_int else value)  # type: ignore[arg-type]

    def set_tooltip(self, text: str) -> None:
        for w in self.widgets():
            w.setToolTip(text)
            w.setAccessibleDescription(text)

    def set_enabled(self, enabled: bool) -> None:
        for w in self.widgets():
            w.setEnabled(enabled)

    def _on_slider(self, pos: int) -> None:
        value = pos / self._scale
        if self.is_int:
            self.spin.setValue(pos)
        elif round(self.spin.value() * self._scale) != pos:
            self.spin.setValue(value)

    def _on_spin(self, value: float) -> None:
        if self.slider is not None:
            self.slider.blockSignals(True)
            self.slider.setValue(self._to_pos(value))
            self.slider.blockSignals(False)
        self.value_changed.emit(float(value))


class VerticalScrollArea(QScrollArea):
    """Scrolls only vertically, and asks for enough width that nothing is ever cut off."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def _width_for(self, content: QSize) -> int:
        return (content.width() + self.verticalScrollBar().sizeHint().width()
                + 2 * self.frameWidth())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        widget = self.widget()
        if widget is None:
            return hint
        return QSize(self._width_for(widget.minimumSizeHint()), hint.height())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        widget = self.widget()
        if widget is None:
            return hint
        return QSize(self._width_for(widget.sizeHint()), hint.height())


STOP_TOOLTIP = (
    "One stop string per line. The reply ends as soon as the model writes any of them; the "
    "stop string itself is not shown. Write \\n for a line break (e.g. \\nUser:) and \\\\ for "
    "a backslash. Blank lines are ignored."
)


def parse_stop_strings(text: str) -> tuple[str, ...]:
    """One stop string per line, with \\n, \\t and \\\\ escapes; blank lines dropped."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        out.append(line.replace("\\\\", "\0").replace("\\n", "\n").replace("\\t", "\t")
                   .replace("\0", "\\"))
    return tuple(out)


def format_stop_strings(stop: tuple[str, ...]) -> str:
    return "\n".join(s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
                     for s in stop)


class StopStringsEdit(QPlainTextEdit):
    """Stop strings, one per line, with escapes so that a line break can be one."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("One per line, e.g. ###")
        self.setToolTip(STOP_TOOLTIP)
        self.setAccessibleName("Stop strings")
        self.setTabChangesFocus(True)  # Tab goes on; a tab in a stop string is written \t
        self.setFixedHeight(self.fontMetrics().lineSpacing() * 3 + 14)

    def stop_strings(self) -> tuple[str, ...]:
        return parse_stop_strings(self.toPlainText())

    def set_stop_strings(self, stop: tuple[str, ...]) -> None:
        self.setPlainText(format_stop_strings(stop))


class CollapsibleSection(QWidget):
    """A semibold header that folds its content away when clicked."""

    def __init__(self, title: str, object_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(object_name)
        self.header = ElidingToolButton(self)  # a long title never widens the panel
        self.header.setObjectName(f"{object_name}_header")
        self.header.setText(title)
        self.header.setAutoRaise(True)  # flat until hovered: a header, not a button
        self.header.setToolTip(f"Show or hide {title.lower()}")
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setArrowType(Qt.ArrowType.DownArrow)
        self.header.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        font = self.header.font()
        font.setWeight(QFont.Weight.DemiBold)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.header.setFont(font)
        rule = QFrame(self)
        rule.setObjectName(f"{object_name}_rule")
        rule.setFrameShape(QFrame.Shape.HLine)
        rule.setFrameShadow(QFrame.Shadow.Plain)
        rule.setForegroundRole(QPalette.ColorRole.Mid)
        self.body = QWidget(self)
        self.body.setObjectName(f"{object_name}_body")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addWidget(rule)
        layout.addSpacing(10)
        layout.addWidget(self.body)
        self.header.clicked.connect(lambda: self.set_expanded(not self.is_expanded()))

    def set_expanded(self, expanded: bool) -> None:
        self.header.setArrowType(
            Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.body.setVisible(expanded)

    def is_expanded(self) -> bool:
        return not self.body.isHidden()


def helper_label(text: str, parent: QWidget | None = None, *, name: str = "") -> QLabel:
    """Small grey explanatory text under a control; plain text (notes quote errors, names)."""
    label = plain_label(text, parent)
    label.setWordWrap(True)
    label.setProperty("role", "helper")  # for stylesheets: QLabel[role="helper"]
    if name:
        label.setObjectName(name)
    font = label.font()
    font.setPointSizeF(font.pointSizeF() * 0.9)
    label.setFont(font)
    palette = label.palette()
    grey = palette.color(QPalette.ColorRole.PlaceholderText)
    palette.setColor(QPalette.ColorRole.WindowText, grey)
    label.setPalette(palette)
    return label
