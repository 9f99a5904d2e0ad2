package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// The web viewer: one page and its script and style, embedded so the binary
// serves them with no network access (no CDN). It reads the same JSON API
// any other client does.
//
//go:embed web
var webFiles embed.FS

func viewerHandler() http.Handler {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page runs only its own script and talks only to this origin.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, sub, "index.html")
			return
		}
		// /static/app.js → app.js
		r2 := r.Clone(r.Context())
		r2.URL.Path = r.URL.Path[len("/static"):]
		files.ServeHTTP(w, r2)
	})
}
