"""`with` blocks for the objects that finish or close: one `__enter__`/`__exit__` for all.

`Finishing`: the block's end finishes the object when the block succeeded and abandons it
when the block raised (writers, transactions, sessions); the exception still propagates.
`Closing`: the block's end closes the object, whatever happened (repositories).
"""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Finishing:
    def exit_ok(self) -> None:
        """The block ended normally: finish (commit, close)."""
        raise NotImplementedError

    def exit_failed(self) -> None:
        """The block raised: abandon (abort, roll back)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.exit_ok()
        else:
            self.exit_failed()


class Closing(Finishing):
    def close(self) -> None:
        raise NotImplementedError

    def exit_ok(self) -> None:
        self.close()

    def exit_failed(self) -> None:
        self.close()
