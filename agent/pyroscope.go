package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// pyroscope pushes profiles to a Grafana Pyroscope server through its
// HTTP ingest API: POST /ingest?name=SERVICE{labels}&from=&until=
// &format=pprof with the gzipped pprof as the body. Pyroscope names the
// series process_cpu (its cpu/nanoseconds sample type) with the labels
// of the name (service_name from SERVICE) and of the samples (pid,
// thread_name, container_id).
type pyroscope struct {
	ingest *url.URL
	client *http.Client
}

func newPyroscope(base, hostname string) (*pyroscope, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sframe agent: --pyroscope %q: want http://HOST:PORT", base)
	}
	u = u.JoinPath("ingest")
	return &pyroscope{ingest: u, client: &http.Client{}}, nil
}

// key returns Pyroscope's series key of s: the service and its labels,
// name{k=v,...}, sorted.
func (p *pyroscope) key(s *shipment) string {
	var b strings.Builder
	b.WriteString(appName(s.service))
	b.WriteByte('{')
	keys := make([]string, 0, len(s.labels))
	for k := range s.labels {
		if k != "service_name" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(sanitize(s.labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// appName makes a service name one that Pyroscope takes as the
// application name of a series key: it refuses (400) any but the
// characters [A-Za-z0-9_.-], which would leave a service named by a
// cgroup path (/system.slice/x.service), a kernel-style name
// (kworker/0:1) or g++ never stored; each other byte becomes '_'.
func appName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// send implements sender. A 4xx answer but 429 refuses the profile for
// good; anything else is retried.
func (p *pyroscope) send(ctx context.Context, s *shipment) error {
	u := *p.ingest
	q := url.Values{}
	q.Set("name", p.key(s))
	q.Set("from", strconv.FormatInt(s.start.Unix(), 10))
	q.Set("until", strconv.FormatInt(max(s.end.Unix(), s.start.Unix()+1), 10))
	q.Set("format", "pprof")
	q.Set("spyName", "sframe")
	u.RawQuery = q.Encode()
	return post(ctx, p.client, u.String(), "application/octet-stream", s.pprof)
}

// post sends body to a profile server at url and says how it answered:
// nil for 2xx, an errRefused error for a refusal (4xx, but for 429), else
// an error worth a retry; each with the first line of the answer.
func post(ctx context.Context, client *http.Client, url, contentType string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s: %s", errRefused, resp.Status, oneLine(msg))
	}
	return fmt.Errorf("%s: %s", resp.Status, oneLine(msg))
}

// oneLine makes a server's answer fit in one line of the log.
func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
