package telegramtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strconv"
	"strings"
)

// maxParams bounds how many parameters one request may carry.
const maxParams = 256

// params are a Bot API call's parameters, from the query string and the
// body, as Telegram accepts them: JSON, form-urlencoded or multipart. JSON
// values that are not strings are kept as their JSON text (so reply_markup
// reads the same whether sent as an object or as a string).
type params struct {
	v     map[string]string
	files map[string]fileParam
}

// fileParam is an uploaded file.
type fileParam struct {
	Name string
	Data []byte
}

// errBadParams is the parse failure; the caller answers 400.
var errBadParams = errors.New("telegramtest: bad request parameters")

// parseParams parses query (the raw query string) and body according to
// contentType. It never panics, and it bounds the number of parameters.
func parseParams(contentType, query string, body []byte) (params, error) {
	p := params{v: map[string]string{}, files: map[string]fileParam{}}
	q, err := url.ParseQuery(query)
	if err != nil {
		return p, fmt.Errorf("%w: query: %w", errBadParams, err)
	}
	for k, vs := range q {
		if err := p.set(k, vs[0]); err != nil {
			return p, err
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return p, nil
	}
	mt, mp, err := mime.ParseMediaType(contentType)
	if err != nil {
		// Telegram guesses; a body without a usable type is tried as JSON.
		mt = "application/json"
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		f, err := url.ParseQuery(string(body))
		if err != nil {
			return p, fmt.Errorf("%w: form: %w", errBadParams, err)
		}
		for k, vs := range f {
			if err := p.set(k, vs[0]); err != nil {
				return p, err
			}
		}
	case "multipart/form-data":
		if err := p.parseMultipart(body, mp["boundary"]); err != nil {
			return p, err
		}
	default:
		if err := p.parseJSON(body); err != nil {
			return p, err
		}
	}
	return p, nil
}

func (p *params) set(k, v string) error {
	if _, ok := p.v[k]; !ok && len(p.v)+len(p.files) >= maxParams {
		return fmt.Errorf("%w: more than %d parameters", errBadParams, maxParams)
	}
	p.v[k] = v
	return nil
}

func (p *params) parseJSON(body []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil { // also refuses arrays and scalars
		return fmt.Errorf("%w: json: %w", errBadParams, err)
	}
	if m == nil {
		return nil // a JSON null body carries no parameters
	}
	for k, raw := range m {
		raw = bytes.TrimSpace(raw)
		v := string(raw)
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("%w: json: %w", errBadParams, err)
			}
			v = s
		}
		if v == "null" {
			continue
		}
		if err := p.set(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *params) parseMultipart(body []byte, boundary string) error {
	if boundary == "" {
		return fmt.Errorf("%w: multipart without boundary", errBadParams)
	}
	r := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: multipart: %w", errBadParams, err)
		}
		name := part.FormName()
		if name == "" {
			continue
		}
		if part.FileName() != "" {
			data, err := io.ReadAll(part)
			if err != nil {
				return fmt.Errorf("%w: multipart: %w", errBadParams, err)
			}
			if _, ok := p.files[name]; !ok && len(p.v)+len(p.files) >= maxParams {
				return fmt.Errorf("%w: more than %d parameters", errBadParams, maxParams)
			}
			p.files[name] = fileParam{Name: part.FileName(), Data: data}
			continue
		}
		b, err := io.ReadAll(part)
		if err != nil {
			return fmt.Errorf("%w: multipart: %w", errBadParams, err)
		}
		if err := p.set(name, string(b)); err != nil {
			return err
		}
	}
}

func (p params) get(k string) string { return p.v[k] }

func (p params) has(k string) bool {
	_, ok := p.v[k]
	return ok
}

// int64 reads an integer parameter; ok is false when it is absent.
func (p params) int64(k string) (n int64, ok bool, err error) {
	s, ok := p.v[k]
	if !ok || s == "" {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%w: %s is not an integer", errBadParams, k)
	}
	return n, true, nil
}

// bool reads a boolean parameter as Telegram does ("true", "1").
func (p params) bool(k string) bool {
	switch strings.ToLower(strings.TrimSpace(p.v[k])) {
	case "true", "1":
		return true
	}
	return false
}
