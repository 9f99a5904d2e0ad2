package server

import (
	"compress/gzip"
	"net/http"

	"github.com/klauspost/compress/gzhttp"
)

// gzipTypes are the replies worth compressing: JSON (a 2,792-node group's
// view is ~480 KB of it) and the viewer's text. Training batches and
// backups are binary and streamed; they go as they are.
var gzipTypes = []string{"application/json", "text/html", "text/css", "text/javascript", "application/javascript",
	"image/svg+xml", "text/plain"}

// withGzip compresses a reply of those types, 1 KiB or more, for a
// client that asks for it (Accept-Encoding: gzip), through klauspost's
// gzhttp, which also sets Vary and drops Content-Length. The default
// speed level: the API answers on a loopback or a LAN, where CPU costs
// more than bytes.
func withGzip(h http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(gzhttp.ContentTypes(gzipTypes), gzhttp.MinSize(1024), gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		panic("server: gzip options: " + err.Error()) // fixed options: a build defect
	}
	return wrap(h)
}
