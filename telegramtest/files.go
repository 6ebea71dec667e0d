package telegramtest

import (
	"crypto/subtle"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
)

// storedFile is a file the server knows: uploaded by the bot, sent by a
// simulated user, or named by URL (then without content).
type storedFile struct {
	id, unique string
	path       string // getFile's file_path
	name       string
	mime       string
	size       int64
	data       []byte // nil when not kept (a URL, or over Config.MaxFileBytes)
}

// newFileLocked registers a file of the given kind ("photos", "documents",
// …) and keeps its content while Config.MaxFileBytes allows.
func (s *Server) newFileLocked(kind, name string, data []byte) *storedFile {
	s.st.nextFile++
	n := s.st.nextFile
	prefix := map[string]string{"photos": "AgAC", "stickers": "CAAC", "videos": "BAAC", "music": "CQAC"}[kind]
	if prefix == "" {
		prefix = "BQAC"
	}
	ext := path.Ext(name)
	if ext == "" && kind == "photos" {
		ext = ".jpg"
	}
	f := &storedFile{
		id:     fmt.Sprintf("%sAgAD%08dQ%d", prefix, n, s.botID%1000),
		unique: fmt.Sprintf("AQAD%08d", n),
		path:   fmt.Sprintf("%s/file_%d%s", kind, n, ext),
		name:   name,
		mime:   mime.TypeByExtension(ext),
		size:   int64(len(data)),
	}
	if data != nil && s.st.fileBytes+int64(len(data)) <= s.cfg.MaxFileBytes {
		f.data = append([]byte(nil), data...)
		s.st.fileBytes += int64(len(data))
	}
	s.st.files[f.id] = f
	s.st.filePaths[f.path] = f
	return f
}

// inputFileLocked resolves an InputFile parameter value: an upload in the
// request (the field itself or attach://name), a file_id the server knows,
// or an HTTP URL. It refuses anything else as Telegram does.
func (s *Server) inputFileLocked(p params, field, value, kind string) (*storedFile, *apiError) {
	if f, ok := p.files[field]; ok && value == "" {
		return s.newFileLocked(kind, f.Name, f.Data), nil
	}
	if value == "" {
		return nil, badRequest("there is no " + strings.TrimSuffix(field, "s") + " in the request")
	}
	if ref, ok := strings.CutPrefix(value, "attach://"); ok {
		f, ok := p.files[ref]
		if !ok {
			return nil, badRequest("wrong HTTP URL specified")
		}
		return s.newFileLocked(kind, f.Name, f.Data), nil
	}
	if f, ok := s.st.files[value]; ok {
		return f, nil
	}
	if strings.HasPrefix(value, "http://") || strings.HasPrefix(value, "https://") {
		name := value[strings.LastIndexByte(value, '/')+1:]
		name, _, _ = strings.Cut(name, "?")
		return s.newFileLocked(kind, name, nil), nil
	}
	return nil, badRequest("wrong file identifier/HTTP URL specified")
}

type apiFile struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileSize     int64  `json:"file_size,omitempty"`
	FilePath     string `json:"file_path,omitempty"`
}

func (s *Server) getFileLocked(p params) (any, *apiError) {
	id := strings.TrimSpace(p.get("file_id"))
	if id == "" {
		return nil, badRequest("file_id is empty")
	}
	f, ok := s.st.files[id]
	if !ok {
		return nil, badRequest("invalid file_id")
	}
	return apiFile{FileID: f.id, FileUniqueID: f.unique, FileSize: f.size, FilePath: f.path}, nil
}

// serveFile answers GET /file/bot<token>/<file_path> with the file's
// content, as Telegram's download URL does.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, fpath, ok := strings.Cut(rest, "/")
	if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.Token)) != 1 {
		writeAPIError(w, &apiError{code: 401, desc: "Unauthorized"})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeAPIError(w, &apiError{code: 405, desc: "Method Not Allowed"})
		return
	}
	defer s.track("file")()
	s.mu.Lock()
	found := s.st.filePaths[fpath]
	s.mu.Unlock()
	if found == nil {
		writeAPIError(w, &apiError{code: 404, desc: "Not Found"})
		return
	}
	if found.data == nil && found.size > 0 {
		writeAPIError(w, &apiError{code: 404, desc: "Not Found: telegramtest did not keep this file's content (Config.MaxFileBytes)"})
		return
	}
	ct := found.mime
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", fmt.Sprint(len(found.data)))
	w.WriteHeader(200)
	if r.Method == http.MethodGet {
		w.Write(found.data)
	}
}
