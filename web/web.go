// Package web embeds the server-rendered pages (templates/) and their static
// files (static/). Pages are html/template; there is no single-page app.
package web

import "embed"

// Templates holds templates/*.html.
//
//go:embed templates/*.html
var Templates embed.FS

// Static holds static/*, served under /static/.
//
//go:embed static/*
var Static embed.FS
