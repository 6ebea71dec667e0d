package botapi

import (
	"reflect"
	"time"
)

// foreignAPIError reads Telegram's refusal out of another library's error
// type, by the shape Go Telegram libraries share: a struct (or pointer to
// one) with an integer ErrorCode, a string Description (or Message), and
// Telegram's parameters as integer RetryAfter (seconds, never a
// time.Duration) and MigrateToChatID fields, directly or in a Parameters
// struct (or pointer). telego's
// *telegoapi.Error and go-telegram/bot's *TooManyRequestsError and
// *MigrateError have this shape. It returns nil unless a status, a
// retry_after or a migrate_to_chat_id was found.
func foreignAPIError(e error) *APIError {
	v := reflect.ValueOf(e)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	ae := &APIError{Description: "no description"}
	found := false
	if code, ok := intField(v, "ErrorCode"); ok && code != 0 {
		ae.Code, found = int(code), true
	}
	for _, name := range []string{"Description", "Message"} {
		if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.String && f.String() != "" {
			ae.Description = f.String()
			break
		}
	}
	params := []reflect.Value{v}
	if p := v.FieldByName("Parameters"); p.IsValid() {
		for p.Kind() == reflect.Pointer && !p.IsNil() {
			p = p.Elem()
		}
		if p.Kind() == reflect.Struct {
			params = append(params, p)
		}
	}
	for _, p := range params {
		if s, ok := intField(p, "RetryAfter"); ok && s > 0 {
			ae.RetryAfter = MaxRetryAfter
			if s < int64(MaxRetryAfter/time.Second) {
				ae.RetryAfter = time.Duration(s) * time.Second
			}
			found = true
		}
		if id, ok := intField(p, "MigrateToChatID"); ok && id != 0 {
			ae.MigrateToChatID, found = id, true
		}
	}
	if !found {
		return nil
	}
	return ae
}

// durationType is excluded from the shape: a time.Duration RetryAfter is a
// type of our own making (or another's) whose unit is not Telegram's.
var durationType = reflect.TypeFor[time.Duration]()

// intField returns the value of v's exported integer field name; a
// time.Duration field does not count.
func intField(v reflect.Value, name string) (int64, bool) {
	f, ok := v.Type().FieldByName(name)
	if !ok || !f.IsExported() || f.Type == durationType {
		return 0, false
	}
	fv := v.FieldByIndex(f.Index)
	switch fv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fv.Int(), true
	}
	return 0, false
}
