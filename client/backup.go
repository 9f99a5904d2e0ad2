package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Backup is GET /api/v1/backup: a consistent copy of the server's whole
// file as one commit left it, written to w as it arrives (it may be large,
// so it is never held in memory). A copy cut short is an error, never a
// short file reported whole. It returns the bytes written.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if _, err := c.APIVersion(ctx); err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.Base, "/")+"/api/v1/backup", nil)
	if err != nil {
		return 0, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	// The copy takes as long as it takes: no client-wide timeout, only
	// ctx's.
	hc := http.Client{}
	if c.HTTP != nil {
		hc.Transport = c.HTTP.Transport
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return 0, &APIError{Status: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("patrdb client: backup: %w", err)
	}
	if want, perr := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); perr == nil && n != want {
		return n, fmt.Errorf("patrdb client: backup: %d of %d bytes arrived", n, want)
	}
	return n, nil
}
