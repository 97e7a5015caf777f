"""A `Static` that redraws only when its text changes, and asks for a layout only when it must.

`Static.update` always requests a layout, and one layout request reflows the whole screen (every
panel of every profile). The console refreshes up to ten times a second, and most of its lines
say the same thing as last time, so `TextLine.set_text` does nothing for an unchanged text,
repaints just this widget when its size cannot change (`fixed_size`: its CSS gives it a height
and its width comes from its container), and otherwise asks for a layout only when the width of
a line changed.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class TextLine(Static):
    def __init__(self, text: str = "", *, fixed_size: bool = False, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(text, id=id, classes=classes)
        self.fixed_size = fixed_size
        self.text = text
        self._cells: tuple[int, ...] = ()  # the width of each line shown

    def set_text(self, text: str) -> bool:
        """Show `text` (console markup); False when it was already shown."""
        if text == self.text:
            return False
        self.text = text
        content = Content.from_markup(text)
        if self.fixed_size:
            self.update(content, layout=False)
            return True
        cells = tuple(line.cell_length for line in content.split("\n"))
        self.update(content, layout=cells != self._cells)
        self._cells = cells
        return True
