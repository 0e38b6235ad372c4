"""Any SPARQL 1.1 endpoint: Query and Update protocols plus the Graph Store protocol.

`LUMA_KB_URL=http://host:port` points at an Oxigraph server (`oxigraph serve`), whose paths
are `/query`, `/update` and `/store`; other servers (Fuseki, GraphDB, Virtuoso) expose the
same protocols under their own paths, given with `LUMA_KB_QUERY_URL` and friends (read into
`Settings` and passed here).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator

import pyoxigraph as ox

from luma.errors import QueryError, QueryTimeout, StoreError
from luma.kb.store.base import RESULT_FORMATS, QueryOutput, QuadStore, answer_too_large

_GRAPH_MEDIA = "application/n-triples"


class EndpointStore(QuadStore):
    """A remote quad store spoken to over the standard SPARQL protocols (no home-made protocol)."""

    backend = "sparql-endpoint"

    def __init__(self, base: str, timeout: float = 600.0, *, query_url: str | None = None,
                 update_url: str | None = None, store_url: str | None = None):
        base = base.rstrip("/")
        self.query_url = query_url or base + "/query"
        self.update_url = update_url or base + "/update"
        self.store_url = store_url or base + "/store"
        self.timeout = timeout
        self._oxigraph: bool | None = None

    def _request(self, url, data=None, headers=None, method="POST", timeout=None) -> tuple[str, bytes]:
        req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
        with self._open(req, timeout or self.timeout) as resp:
            try:
                return resp.headers.get("Content-Type", ""), resp.read()
            except TimeoutError:
                raise QueryTimeout(f"no answer within {timeout or self.timeout:g} s", source=url) from None
            except OSError as exc:
                raise StoreError(f"the answer broke off: {exc}", source=url) from None

    def _open(self, req, timeout: float):
        """urlopen with the protocol's errors turned into LumaErrors."""
        url = req.full_url
        try:
            return urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip().splitlines()
            msg = detail[0] if detail else exc.reason
            if exc.code == 400:
                raise QueryError(f"the endpoint refused the request: {msg}", source=url) from None
            raise StoreError(f"HTTP {exc.code}: {msg}", source=url) from None
        except TimeoutError:
            raise QueryTimeout(f"no answer within {timeout:g} s", source=url) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise QueryTimeout(f"no answer within {timeout:g} s", source=url) from None
            raise StoreError(f"cannot reach the SPARQL endpoint: {reason}", source=url) from None

    def query(self, sparql, *, union=True, results="json", timeout=None, named_graphs=None, default_graphs=None):
        url, data, headers = self._query_request(sparql, union, results, named_graphs, default_graphs)
        ctype, body = self._request(url, data, headers, timeout=timeout)
        return _output(results, ctype, body)

    def query_bounded(self, sparql, limits, spool, *, results="json", union=True, default_graphs=None,
                      named_graphs=None):
        """Stream the answer to a spool file, stopping (and closing the connection) at the answer
        limit or the time-out. The server's own limits bound what it spends (docs/security.md):
        a client cannot stop a query the server already runs."""
        url, data, headers = self._query_request(sparql, union, results, named_graphs, default_graphs)
        spool.mkdir(parents=True, exist_ok=True)
        path = spool / f"answer-{id(sparql):x}"
        deadline = time.monotonic() + (limits.timeout or self.timeout)
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with self._open(req, limits.timeout or self.timeout) as resp, open(path, "wb") as out:
                ctype = resp.headers.get("Content-Type", "")
                size = 0
                while chunk := _read(resp, url, limits.timeout or self.timeout):
                    size += len(chunk)
                    if size > limits.answer_bytes:
                        raise answer_too_large(limits)
                    if time.monotonic() > deadline:
                        raise QueryTimeout(f"no complete answer within {limits.timeout:g} s", source=url)
                    out.write(chunk)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        head = path.read_bytes()[:300] if _media(ctype) != _GRAPH_MEDIA else b""
        return _output(results, ctype, head, file=path)

    def construct_to_file(self, sparql, path, *, union=True, named_graphs=None):
        """Stream the answer to `path` as it arrives: the client holds a block at a time,
        whatever the size of the answer (issue 33: ~7 GB held at 1M chains before)."""
        url, data, headers = self._query_request(sparql, union, "json", named_graphs, None)
        headers["Accept"] = _GRAPH_MEDIA
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        with self._open(req, self.timeout) as resp, open(path, "wb") as out:
            if _media(resp.headers.get("Content-Type", "")) != _GRAPH_MEDIA:
                raise StoreError("the endpoint answered a CONSTRUCT with something other than N-Triples", source=url)
            while chunk := _read(resp, url, self.timeout):
                out.write(chunk)

    def _query_request(self, sparql, union, results, named_graphs, default_graphs):
        fmt = RESULT_FORMATS[results]
        # An explicit default graph replaces the server's union default graph.
        url = self.query_url + ("?union-default-graph" if union and default_graphs is None else "")
        accept = f"{fmt.media_type}, {_GRAPH_MEDIA};q=0.9"
        if named_graphs is not None or default_graphs is not None:
            # The protocol's dataset parameters; a form body, since a thousand graph IRIs would
            # not fit in a URL.
            form = [("query", sparql)] + [("named-graph-uri", g) for g in named_graphs or []]
            form += [("default-graph-uri", g) for g in default_graphs or []]
            data, ctype = urllib.parse.urlencode(form).encode(), "application/x-www-form-urlencoded"
        else:
            data, ctype = sparql.encode(), "application/sparql-query"
        return url, data, {"Content-Type": ctype, "Accept": accept}

    def update(self, sparql):
        self._request(self.update_url, sparql.encode(), {"Content-Type": "application/sparql-update"})

    def bulk_load_nquads(self, chunks: Iterable[bytes], *, checked: bool = False) -> None:
        """Each chunk posted to the Graph Store endpoint; to Oxigraph's server with
        `no_transaction`, its bulk loader (linear in the data: one transaction per 25k records
        grew as N^1.31), any other server as an ordinary POST. `checked` changes nothing here:
        the server's `lenient` also makes its bulk loader skip lines that fail to parse."""
        for chunk in chunks:
            if chunk:
                url = self.store_url + ("?no_transaction" if self._is_oxigraph() else "")
                self._request(url, chunk, {"Content-Type": "application/n-quads"})

    def _is_oxigraph(self) -> bool:
        """Whether the server says it is Oxigraph (its `Server` header), asked once."""
        if self._oxigraph is None:
            req = urllib.request.Request(self.query_url + "?query=ASK%7B%7D", method="GET",
                                         headers={"Accept": "application/sparql-results+json"})
            with self._open(req, self.timeout) as resp:
                self._oxigraph = "oxigraph" in resp.headers.get("Server", "").lower()
        return self._oxigraph

    def load_nquads(self, data: bytes) -> None:
        self._request(self.store_url, data, {"Content-Type": "application/n-quads"})

    def iter_quads(self) -> Iterator[ox.Quad]:
        _, body = self._request(self.store_url, None, {"Accept": "application/n-quads"}, method="GET")
        try:
            quads = list(ox.parse(body, format=ox.RdfFormat.N_QUADS))
        except SyntaxError as exc:
            raise StoreError(f"the endpoint's dump is not complete N-Quads: {exc}", source=self.store_url) from None
        return (q for q in quads if not isinstance(q.graph_name, ox.DefaultGraph))

    def clear(self) -> None:
        self.update("CLEAR ALL")


def _read(resp, url: str, timeout: float) -> bytes:
    try:
        return resp.read(1 << 16)
    except TimeoutError:
        raise QueryTimeout(f"no answer within {timeout:g} s", source=url) from None
    except OSError as exc:
        raise StoreError(f"the answer broke off: {exc}", source=url) from None


def _media(ctype: str) -> str:
    return ctype.split(";")[0].strip()


def _output(results: str, ctype: str, body: bytes, file=None) -> QueryOutput:
    """A QueryOutput from a response's media type and its body (or the first bytes of the file
    it was spooled to)."""
    media = _media(ctype)
    kind = "graph" if media == _GRAPH_MEDIA else "ask" if _is_boolean(results, body) else "select"
    return QueryOutput(kind, media, b"" if file else body, file=file, complete=False)


def _is_boolean(results: str, body: bytes) -> bool:
    """Whether a results document answers an ASK (its media type is the same as a SELECT's)."""
    head = body[:300]
    if results == "json":
        return b'"boolean"' in head and b'"results"' not in head
    if results == "xml":
        return b"<boolean>" in head
    return body.strip() in (b"true", b"false")  # CSV/TSV: a bare boolean, no header line
