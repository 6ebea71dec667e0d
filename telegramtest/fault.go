package telegramtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// FaultKind is what an armed [Fault] does to a call.
type FaultKind string

// The fault kinds. Unless stated otherwise the call has no effect.
const (
	// FaultNone only applies the Fault's Delay and Jitter, then answers
	// normally: latency.
	FaultNone FaultKind = ""
	// FaultRefuseConnection resets the next accepted connections before
	// reading anything (Method must be empty: it acts before a request is
	// read). A client sees a reset or EOF, having sent at most its request.
	// Only new connections count: a keep-alive connection already open is
	// not affected.
	FaultRefuseConnection FaultKind = "refuse_connection"
	// FaultReset reads the request headers, then resets the connection
	// (TCP RST) without reading the body.
	FaultReset FaultKind = "reset"
	// FaultClose reads the request headers, then closes the connection
	// without reading the body or answering.
	FaultClose FaultKind = "close"
	// FaultHang reads the request and never answers, until the client
	// gives up or the server is closed.
	FaultHang FaultKind = "hang"
	// FaultDropBeforeEffect reads the whole request and closes the
	// connection without applying it.
	FaultDropBeforeEffect FaultKind = "drop_before_effect"
	// FaultDropAfterEffect applies the call (the message is sent and in the
	// ledger) and closes the connection without answering.
	FaultDropAfterEffect FaultKind = "drop_after_effect"
	// FaultServerError answers Status (default 500) with Telegram's JSON
	// error body.
	FaultServerError FaultKind = "server_error"
	// FaultProxyError answers 502 with an HTML page, as a proxy in front of
	// Telegram would.
	FaultProxyError FaultKind = "proxy_error"
	// FaultTooManyRequests answers 429 with parameters.retry_after =
	// RetryAfter (default 1), without touching the rate limits.
	FaultTooManyRequests FaultKind = "too_many_requests"
	// FaultSlowBody applies the call, sends the headers and half the body,
	// waits Stall (default 1 s), then sends the rest.
	FaultSlowBody FaultKind = "slow_body"
	// FaultUnreachable makes the server unreachable for Duration (default
	// DefaultFaultOutage), starting when it is armed: it stops listening,
	// so the kernel refuses new connections, and closes idle keep-alive
	// connections (and each one that becomes idle meanwhile). No request
	// byte can reach the server, so a dispatch-aware client reports *not
	// dispatched*, and a retry after the outage is safe. Method, Nth and
	// Times must be zero: a refused connection carries no method, and the
	// kernel's refusals cannot be counted, so an outage lasts a time, not
	// a number of calls. Calls already being served finish normally;
	// [Server.Disarm] ends the outage early (the control API cannot: it is
	// unreachable too).
	FaultUnreachable FaultKind = "unreachable"
	// FaultHugeBody applies the call and answers with the normal JSON
	// followed by Size bytes of whitespace (default 8 MiB): valid JSON,
	// too big for a bounded reader.
	FaultHugeBody FaultKind = "huge_body"
)

// Defaults of [Fault].
const (
	DefaultFaultStall = time.Second
	DefaultFaultSize  = 8 << 20
	// DefaultFaultOutage is how long FaultUnreachable lasts.
	DefaultFaultOutage = time.Second
	// MaxFaultOutage bounds Fault.Duration.
	MaxFaultOutage = time.Minute
	// MaxFaultSize bounds Fault.Size.
	MaxFaultSize = 1 << 30
)

// Fault disturbs matching Bot API calls. Arm it with [Server.Arm] or
// [Config.Faults]. The zero value (besides Delay) matches the next call
// of any method once and does nothing.
type Fault struct {
	// Method limits the fault to one method (case-insensitive). Empty
	// matches every method.
	Method string `json:"method,omitempty"`
	// Kind is what the fault does. Zero means only Delay.
	Kind FaultKind `json:"kind,omitempty"`
	// Nth makes the fault start at the Nth matching call after arming.
	// Zero means 1, the next one.
	Nth int `json:"nth,omitempty"`
	// Times is how many matching calls the fault hits from then on. Zero
	// means 1; -1 means every one.
	Times int `json:"times,omitempty"`
	// Delay is waited before anything else, plus a uniform random part of
	// up to Jitter. Close ends the wait.
	Delay  time.Duration `json:"delay,omitempty"`
	Jitter time.Duration `json:"jitter,omitempty"`
	// Status is FaultServerError's HTTP status. Zero means 500.
	Status int `json:"status,omitempty"`
	// RetryAfter is FaultTooManyRequests' retry_after. Zero means 1.
	RetryAfter int `json:"retry_after,omitempty"`
	// Stall is FaultSlowBody's pause. Zero means DefaultFaultStall.
	Stall time.Duration `json:"stall,omitempty"`
	// Size is FaultHugeBody's padding. Zero means DefaultFaultSize.
	Size int `json:"size,omitempty"`
	// Duration is how long FaultUnreachable lasts, at most
	// MaxFaultOutage. Zero means DefaultFaultOutage.
	Duration time.Duration `json:"duration,omitempty"`
}

type armedFault struct {
	Fault
	seen, fired int
}

func knownKind(k FaultKind) bool {
	switch k {
	case FaultNone, FaultRefuseConnection, FaultReset, FaultClose, FaultHang,
		FaultDropBeforeEffect, FaultDropAfterEffect, FaultServerError, FaultProxyError,
		FaultTooManyRequests, FaultSlowBody, FaultHugeBody, FaultUnreachable:
		return true
	}
	return false
}

func (f Fault) validate() error {
	switch {
	case !knownKind(f.Kind):
		return fmt.Errorf("unknown Fault.Kind %q", f.Kind)
	case f.Kind == FaultRefuseConnection && f.Method != "":
		return errors.New("Fault.Method must be empty for refuse_connection")
	case f.Kind == FaultUnreachable && (f.Method != "" || f.Nth != 0 || f.Times != 0):
		return errors.New("Fault.Method, Nth and Times must be zero for unreachable (it lasts Duration)")
	case f.Duration < 0 || f.Duration > MaxFaultOutage:
		return fmt.Errorf("Fault.Duration must be in 0..%v", MaxFaultOutage)
	case f.Nth < 0:
		return errors.New("Fault.Nth must be >= 0")
	case f.Times < -1:
		return errors.New("Fault.Times must be >= -1")
	case f.Delay < 0 || f.Jitter < 0 || f.Stall < 0:
		return errors.New("Fault.Delay, Jitter and Stall must be >= 0")
	case f.Status != 0 && (f.Status < 500 || f.Status > 599):
		return errors.New("Fault.Status must be a 5xx status")
	case f.RetryAfter < 0:
		return errors.New("Fault.RetryAfter must be >= 0")
	case f.Size < 0 || f.Size > MaxFaultSize:
		return fmt.Errorf("Fault.Size must be in 0..%d", MaxFaultSize)
	}
	return nil
}

// Arm adds a fault; faults fire in the order armed (the first that fires
// on a call wins, and every matching fault counts the call). It fails
// when f is invalid or MaxFaults are armed.
func (s *Server) Arm(f Fault) error {
	if err := f.validate(); err != nil {
		return fmt.Errorf("telegramtest: %w", err)
	}
	if f.Kind == FaultUnreachable {
		if s.sw == nil {
			return errors.New("telegramtest: an unreachable fault needs a started server (or Config.Faults)")
		}
		s.sw.outage(cmp.Or(f.Duration, DefaultFaultOutage))
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.st.faults) >= MaxFaults {
		return fmt.Errorf("telegramtest: at most %d faults may be armed", MaxFaults)
	}
	s.st.faults = append(s.st.faults, &armedFault{Fault: f})
	return nil
}

// Disarm removes every armed fault and ends an [FaultUnreachable] outage
// at once.
func (s *Server) Disarm() {
	s.mu.Lock()
	s.st.faults = nil
	s.mu.Unlock()
	if s.sw != nil {
		s.sw.endOutage()
	}
}

// takeFault counts a call of method against the armed faults and returns
// the one that fires, if any.
func (s *Server) takeFault(method string) *Fault {
	return s.takeMatching(func(f *armedFault) bool {
		return f.Kind != FaultRefuseConnection && (f.Method == "" || strings.EqualFold(f.Method, method))
	})
}

func (s *Server) takeConnFault() bool {
	return s.takeMatching(func(f *armedFault) bool { return f.Kind == FaultRefuseConnection }) != nil
}

func (s *Server) takeMatching(match func(*armedFault) bool) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var hit *Fault
	kept := s.st.faults[:0]
	for _, f := range s.st.faults {
		if match(f) {
			f.seen++
			times := f.Times
			if times == 0 {
				times = 1
			}
			if hit == nil && f.seen >= max(f.Nth, 1) && (times < 0 || f.fired < times) {
				f.fired++
				c := f.Fault
				if c.Jitter > 0 {
					c.Delay += time.Duration(s.rng.Int64N(int64(c.Jitter)))
				}
				hit = &c
			}
			if times >= 0 && f.fired >= times {
				continue // spent
			}
		}
		kept = append(kept, f)
	}
	clear(s.st.faults[len(kept):])
	s.st.faults = kept
	return hit
}

// faultBefore applies the part of f that comes before the call; it
// reports whether the call is over.
func (s *Server) faultBefore(w http.ResponseWriter, r *http.Request, f *Fault) bool {
	if err := s.sleep(r.Context(), f.Delay); err != nil {
		hijackClose(w, false)
		return true
	}
	switch f.Kind {
	case FaultReset:
		hijackClose(w, true)
	case FaultClose:
		hijackClose(w, false)
	case FaultHang:
		// Reading the body lets net/http notice the client leaving.
		io.Copy(io.Discard, io.LimitReader(r.Body, s.cfg.MaxRequestBytes))
		select {
		case <-r.Context().Done():
		case <-s.ctx.Done():
		}
		hijackClose(w, false)
	case FaultServerError:
		code := f.Status
		if code == 0 {
			code = 500
		}
		writeAPIError(w, &apiError{code: code, desc: http.StatusText(code)})
	case FaultProxyError:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
	case FaultTooManyRequests:
		n := f.RetryAfter
		if n == 0 {
			n = 1
		}
		e := &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", n), retryAfter: n}
		s.mu.Lock()
		s.noteRetryLocked(e)
		s.mu.Unlock()
		writeAPIError(w, e)
	default:
		return false
	}
	return true
}

// faultAnswer writes env slowly or padded, for FaultSlowBody and
// FaultHugeBody.
func (s *Server) faultAnswer(ctx context.Context, w http.ResponseWriter, f *Fault, env envelope) {
	b, _ := json.Marshal(env) // plain structs: cannot fail
	rc := http.NewResponseController(w)
	// Close must not wait for a client that stopped reading: it makes
	// blocked writes fail at once.
	stop := context.AfterFunc(s.ctx, func() { rc.SetWriteDeadline(time.Now()) })
	defer stop()
	w.Header().Set("Content-Type", "application/json")
	if f.Kind == FaultSlowBody {
		stall := f.Stall
		if stall == 0 {
			stall = DefaultFaultStall
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(200)
		w.Write(b[:len(b)/2])
		rc.Flush()
		s.sleep(ctx, stall)
		w.Write(b[len(b)/2:])
		return
	}
	size := f.Size
	if size == 0 {
		size = DefaultFaultSize
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+size))
	w.WriteHeader(200)
	if _, err := w.Write(b); err != nil {
		return
	}
	pad := []byte(strings.Repeat(" ", 32<<10))
	for size > 0 {
		n := min(size, len(pad))
		if _, err := w.Write(pad[:n]); err != nil {
			return
		}
		size -= n
	}
}
