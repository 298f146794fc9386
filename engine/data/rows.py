"""Rows of a data file read one at a time, so a large file is never held whole in memory.

``iter_rows(path)`` yields the row dicts of a file or a folder of files: JSON lines and text line by line, CSV as
``datasets`` reads it (pandas, 10,000 rows at a time),
Parquet by record batches, and a ``.json`` list object by object through :class:`JsonListReader` (a streaming
parser over a buffered read, on ``json.JSONDecoder.raw_decode``). The rows, and every error (its text, line and
column), are those of reading the whole file at once (:mod:`engine.data.readers` keeps that list interface).

The numbers of a JSON list are those LLaMA-Factory reads: ``datasets``' json builder hands a file to pyarrow's JSON
reader, which reads only one object per line, and a list falls back to pandas' ``read_json``, whose parser
(``ujson_loads`` with ``precise_float=False``) rounds about one fraction in ten of 16 or more digits and some shorter
ones (``1.2345678901234567`` -> ``1.234567890123456``), and reads ``NaN`` as null. :data:`LIST_DECODER` parses a
list's fractions and constants with that same pandas function (JSON lines keep pyarrow's exact reading, which is
Python's). pandas also reads a list's columns named like dates (``date``, ``created_at``, ...) as dates where all
their values parse: :mod:`engine.data.json_dates` finds them in a first pass over such a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from engine.data.errors import DatasetError
from engine.data.json_dates import as_dates, date_columns, line_dates, may_hold_dates, may_hold_iso_dates
from engine.json_text import loads, long_number_error

BUFFER_CHARS = 1 << 20
"""Characters read at a time from a ``.json`` file (a row longer than that grows the buffer as needed)."""
PARQUET_BATCH_ROWS = 2048
CSV_CHUNK_ROWS = 10_000
"""Rows of a CSV file pandas reads (and types) at a time: datasets' csv builder's ``chunksize``."""

TOO_DEEP = "lists or objects nested too deeply to be read (a row needs only a few levels)"
"""The message for a value Python's json cannot decode for its depth (it raises RecursionError)."""

_DECODER = json.JSONDecoder()


def _pandas_number(text: str) -> Any:
    """A fraction or constant (``NaN``, ``Infinity``) as pandas' JSON parser reads it for ``datasets``."""
    from pandas.io.json import ujson_loads

    return ujson_loads(text)  # precise_float=False, read_json's default


LIST_DECODER = json.JSONDecoder(parse_float=_pandas_number, parse_constant=_pandas_number)
"""The decoder of a ``.json`` list's values: numbers as LLaMA-Factory's loader reads them (see the module's notes)."""
_WHITESPACE = json.decoder.WHITESPACE


def json_error(path: Path, msg: str, lineno: int, colno: int) -> DatasetError:
    return DatasetError(
        f"{path} is not valid JSON: {msg} at line {lineno}, column {colno}. "
        "Fix the file (a JSON list of objects, or one object per line in a .jsonl file)."
    )


def _probe(text: str) -> tuple[str, int]:
    """The message and position json gives for ``text`` (so list-level errors read as this Python's json says)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as err:
        return err.msg, err.pos
    return "", 0  # pragma: no cover - the probes are invalid JSON


def check_object(path: Path, index: int, row: Any) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise DatasetError(f"{path}: row {index} is a {type(row).__name__}, not an object with named columns.")
    return row


class JsonListReader:
    """Values of a JSON document read through a buffer of ``buffer_chars`` characters; positions in errors are
    the whole file's (line and column as ``json.loads`` of the whole text reports them)."""

    def __init__(self, path: Path, handle: IO[str], buffer_chars: int = BUFFER_CHARS,
                 decoder: json.JSONDecoder = _DECODER) -> None:
        self.path, self.handle, self.size, self.decoder = path, handle, max(1, int(buffer_chars)), decoder
        self.buf, self.pos, self.eof = "", 0, False
        self.line, self.col = 0, 0  # newlines before the buffer, characters since the last one

    def _more(self) -> bool:
        """Drop what was consumed and read more; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.handle.read(max(self.size, len(self.buf) - self.pos))  # a long value doubles the read
        if not chunk:  # the buffer stays as it is, so positions in it stay valid for an error
            self.eof = True
            return False
        consumed = self.pos
        if consumed:
            newlines = self.buf.count("\n", 0, consumed)
            if newlines:
                self.line += newlines
                self.col = consumed - (self.buf.rfind("\n", 0, consumed) + 1)
            else:
                self.col += consumed
        self.buf, self.pos = self.buf[consumed:] + chunk, 0
        return True

    def error(self, msg: str, pos: int) -> DatasetError:
        newlines = self.buf.count("\n", 0, pos)
        colno = pos - self.buf.rfind("\n", 0, pos)
        return json_error(self.path, msg, self.line + newlines + 1, colno if newlines else colno + self.col)

    def peek(self) -> str:
        """The next character after whitespace ('' at the end of the file); ``pos`` is left on it."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def value(self) -> Any:
        """Decode the value at ``pos`` (reading more while it may be cut off by the buffer's end)."""
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                if self._more():
                    continue
                raise self.error(err.msg, err.pos) from None
            except RecursionError:
                raise self.error(TOO_DEEP, self.pos) from None
            except ValueError:  # not a JSONDecodeError (above): a number past the digit limit
                err = long_number_error(self.buf, self.pos)
                raise self.error(err.msg, err.pos) from None
            if end == len(self.buf) and self._more():  # a number or literal may go on in the next read
                continue
            self.pos = end
            return value

    def items(self) -> Iterator[Any]:
        """The elements of the list that starts at ``pos`` (its ``[``), then checks that nothing follows it."""
        self.pos += 1
        if self.peek() == "]":
            self.pos += 1
        else:
            while True:
                yield self.value()
                char = self.peek()
                if char == "]":
                    self.pos += 1
                    break
                if char != ",":
                    raise self.error(_probe("[0 0]")[0], self.pos)
                while True:  # the comma stays in the buffer until the next value is found
                    after = _WHITESPACE.match(self.buf, self.pos + 1).end()
                    if after < len(self.buf) or not self._more():
                        break
                if self.buf[after:after + 1] == "]":  # a trailing comma, reported as this Python's json does
                    msg, at = _probe("[0,]")
                    raise self.error(msg, self.pos if at == 2 else after)
                self.pos = after
        if self.peek():
            raise self.error("Extra data", self.pos)


def _whole_json(path: Path) -> Iterator[dict[str, Any]]:
    """A .json file that is not a list: one object holding the rows' list, or a scalar (refused)."""
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = loads(text)
    except json.JSONDecodeError as err:
        raise json_error(path, err.msg, err.lineno, err.colno) from None
    except RecursionError:
        raise json_error(path, TOO_DEEP, 1, 1) from None
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(data) == 1 and lists:
            data = lists[0]
        else:
            raise DatasetError(f"{path} holds one JSON object; expected a list of row objects.")
    if not isinstance(data, list):
        raise DatasetError(f"{path} must hold a JSON list of row objects.")
    for index, row in enumerate(data):
        yield check_object(path, index, row)


def iter_json(path: Path, buffer_chars: int = BUFFER_CHARS) -> Iterator[dict[str, Any]]:
    """Rows of a JSON file holding a list of objects, parsed one object at a time (a .json file with one object
    per line is read as JSON lines; one object wrapping the list is read whole)."""
    with path.open(encoding="utf-8-sig") as handle:
        reader = JsonListReader(path, handle, buffer_chars)
        first = reader.peek()
        if first == "[":
            dates = date_columns(lambda: _list_items(path, buffer_chars)) if may_hold_dates(path) else {}
            reader.decoder = LIST_DECODER
            for index, row in enumerate(reader.items()):
                yield as_dates(check_object(path, index, row), index, dates)
            return
        if first == "{":
            reader.value()
            if reader.peek():  # more after the first object: JSON lines (json.loads says "Extra data")
                yield from iter_jsonl(path)
                return
    yield from _whole_json(path)


def _list_items(path: Path, buffer_chars: int) -> Iterator[Any]:
    """The values of the JSON list in ``path``, as :func:`iter_json` reads them (a first pass for its dates)."""
    with path.open(encoding="utf-8-sig") as handle:
        reader = JsonListReader(path, handle, buffer_chars, LIST_DECODER)
        reader.peek()
        yield from reader.items()


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a file with one JSON object per line (blank lines ignored); a field of ISO date texts, top-level or
    nested, holds dates, as pyarrow reads it for LLaMA-Factory (:mod:`engine.data.json_dates`)."""
    dates = line_dates(lambda: _jsonl_lines(path)) if may_hold_iso_dates(path) else None
    rows = (row for _, row in _jsonl_lines(path))
    yield from map(dates.apply, rows) if dates else rows


def _jsonl_lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each line of a JSON lines file with its row (blank lines skipped)."""
    index = 0
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = loads(line)
            except json.JSONDecodeError as err:
                raise json_error(path, err.msg, err.lineno + number - 1, err.colno) from None
            except RecursionError:
                raise json_error(path, TOO_DEEP, number, 1) from None
            yield line, check_object(path, index, row)
            index += 1


def iter_jsonl_file(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a ``.jsonl`` file: one object per line, or a JSON list, which ``datasets`` reads for LLaMA-Factory as it
    reads a ``.json`` file (both extensions are JSON to it: pyarrow reads the lines, pandas the list)."""
    with path.open(encoding="utf-8-sig") as handle:
        first = JsonListReader(path, handle).peek()
    yield from iter_json(path) if first == "[" else iter_jsonl(path)


def iter_csv(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a CSV file with a header row, the values ``datasets`` reads for LLaMA-Factory: pandas' ``read_csv``
    with its defaults, :data:`CSV_CHUNK_ROWS` rows at a time, each chunk made an Arrow table. So pandas' missing-value
    strings ('', NA, N/A, NULL, null, None, NaN, nan, #N/A, <NA>, ...) are None, and a column pandas reads as
    numbers (or True/False) holds ints or floats (bools): ints with a missing value are floats. Types are inferred
    per chunk and a later chunk is cast to the first one's types, as datasets' writer casts it (a cast that fails
    fails there too)."""
    import pandas as pd
    import pyarrow as pa

    try:
        reader = pd.read_csv(path, iterator=True, chunksize=CSV_CHUNK_ROWS)
    except pd.errors.EmptyDataError:
        raise DatasetError(f"{path} has no header row; the first line must name the columns.") from None
    except pd.errors.ParserError as err:
        raise DatasetError(f"{path} is not a readable CSV file: {err}") from None
    schema = None
    start = 0
    with reader:
        while True:
            try:
                frame = next(reader)
            except StopIteration:
                return
            except pd.errors.ParserError as err:
                raise DatasetError(f"{path} is not a readable CSV file: {err}") from None
            try:
                table = pa.Table.from_pandas(frame)
            except (OverflowError, pa.ArrowException):  # pandas 3 reads integers past 64 bits as Python ints
                table = pa.Table.from_pandas(_big_ints_as_text(frame))
            if schema is None:
                schema = table.schema
            elif not table.schema.equals(schema, check_metadata=False):
                table = _cast_chunk(path, table, schema, start)
            start += table.num_rows
            yield from table.to_pylist()


def _big_ints_as_text(frame: Any) -> Any:
    """Columns of Python ints (integers past 64 bits, which pandas 3 keeps as ints and Arrow cannot hold) as the
    text pandas 2 reads them as."""
    frame = frame.copy()
    for name in frame.columns:
        if frame[name].dtype == object:
            frame[name] = frame[name].map(lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v)
    return frame


def _cast_chunk(path: Path, table: Any, schema: Any, start: int) -> Any:
    """A later chunk of a CSV file cast to the first chunk's column types, by datasets' own cast."""
    from datasets.features import Features
    from datasets.table import table_cast

    try:
        return table_cast(table, Features.from_arrow_schema(schema).arrow_schema)
    except Exception as err:  # pyarrow's ArrowInvalid, datasets' ValueError / TypeError
        changed = [f"{field.name!r} ({field.type} from row {start + 1:,} on, {schema.field(field.name).type} "
                   "before)" for field in table.schema
                   if field.name in schema.names and field.type != schema.field(field.name).type]
        raise DatasetError(
            f"{path}: pandas reads CSV {CSV_CHUNK_ROWS:,} rows at a time and infers each column's type per chunk; "
            f"column {', '.join(changed) or '?'} cannot take the first chunk's type ({str(err).splitlines()[0]}). "
            "LLaMA-Factory (datasets) fails on this file too. Make the column hold one kind of value throughout, "
            "or convert the file to JSON lines."
        ) from None


def iter_parquet(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a Parquet file, a record batch at a time (needs pyarrow)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as err:
        raise DatasetError(f"Reading {path} needs pyarrow: pip install pyarrow.") from err
    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            yield from batch.to_pylist()
    except DatasetError:
        raise
    except Exception as err:  # pyarrow raises several error types for damaged files
        raise DatasetError(f"{path} is not a readable Parquet file: {err}") from err


def iter_arrow(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of an Arrow IPC file (the stream format ``datasets`` writes, or the file format), a record batch at a
    time, as the ``datasets`` arrow loader LLaMA-Factory uses for ``.arrow`` files reads them."""
    try:
        import pyarrow as pa
    except ImportError as err:
        raise DatasetError(f"Reading {path} needs pyarrow: pip install pyarrow.") from err
    with path.open("rb") as handle:
        try:
            try:
                batches: Any = pa.ipc.open_stream(handle)
            except (OSError, pa.lib.ArrowInvalid):
                handle.seek(0)
                reader = pa.ipc.open_file(handle)
                batches = (reader.get_batch(index) for index in range(reader.num_record_batches))
            for batch in batches:
                yield from batch.to_pylist()
        except DatasetError:
            raise
        except Exception as err:  # pyarrow raises several error types for damaged files
            raise DatasetError(f"{path} is not a readable Arrow file: {err}") from err


def iter_text(path: Path) -> Iterator[dict[str, Any]]:
    """One ``{"text": line}`` row per line, blank ones too (as the ``datasets`` text loader LLaMA-Factory uses reads
    them: a blank line trains its EOS alone)."""
    with path.open(encoding="utf-8-sig") as handle:
        for line in handle:
            yield {"text": line.rstrip("\n")}


ROW_READERS: dict[str, Callable[[Path], Iterator[dict[str, Any]]]] = {
    ".json": iter_json,
    ".jsonl": iter_jsonl_file,
    ".csv": iter_csv,
    ".parquet": iter_parquet,
    ".arrow": iter_arrow,
    ".txt": iter_text,
}


def data_files(path: Path) -> list[Path]:
    """The data files of ``path`` (itself, or a folder's files in name order).

    Raises:
        DatasetError: for a missing path, an empty or mixed folder, or an unsupported extension.
    """
    if not path.exists():
        raise DatasetError(f"Data file not found: {path}. Check `file_name` in dataset_info.json and `dataset_dir`.")
    if path.is_dir():  # LLaMA-Factory reads every entry of the folder, each a data file of the same type
        files = sorted(path.iterdir())
        if not files:
            raise DatasetError(f"Folder {path} holds no data files ({', '.join(ROW_READERS)}).")
        others = [p.name for p in files if not (p.is_file() and p.suffix in ROW_READERS)]
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise DatasetError(f"Folder {path} holds {shown}, not data files ({', '.join(ROW_READERS)}, the extension "
                               "in lower case); LLaMA-Factory reads every entry of a data folder and refuses it too. "
                               "Move them out of the folder.")
        suffixes = {".json" if p.suffix == ".jsonl" else p.suffix for p in files}  # both JSON to `datasets`
        if len(suffixes) > 1:
            raise DatasetError(f"Folder {path} mixes file types ({', '.join(sorted(suffixes))}); keep one type.")
        return files
    if not path.is_file():  # reading a pipe would wait for a writer forever; a device never ends
        raise DatasetError(f"{path} is not a regular file (a pipe, device or socket); point `file_name` in "
                           "dataset_info.json at a data file.")
    if path.suffix.lower() in ROW_READERS and path.suffix not in ROW_READERS:
        raise DatasetError(f"Data file {path}: write its extension in lower case ({path.suffix.lower()}); "
                           f"LLaMA-Factory reads only {', '.join(ROW_READERS)} and refuses {path.suffix!r}.")
    if path.suffix not in ROW_READERS:
        raise DatasetError(f"Unsupported data file type {path.suffix!r} ({path}); use one of: "
                           f"{', '.join(ROW_READERS)}.")
    return [path]


def _not_utf8(path: Path) -> DatasetError:
    """The error for a file that is not UTF-8, with the byte offset in the whole file."""
    try:
        path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        return DatasetError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); re-save it as UTF-8.")
    return DatasetError(f"{path} is not UTF-8 text; re-save it as UTF-8.")  # pragma: no cover


def iter_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a data file or a folder of data files, one at a time.

    Raises:
        DatasetError: for a missing path, an unsupported extension or unreadable content (raised when the bad
            part is reached; the path checks are made before the first row).
    """
    files = data_files(path)
    return _rows_of(files)


def _rows_of(files: list[Path]) -> Iterator[dict[str, Any]]:
    for file in files:
        try:
            yield from ROW_READERS[file.suffix](file)
        except UnicodeDecodeError:
            raise _not_utf8(file) from None
