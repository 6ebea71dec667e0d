// Package tghtml handles Telegram's HTML subset: it escapes text, parses any
// markup leniently into a tree that keeps Telegram's rules, renders it back,
// checks markup strictly as Telegram would, and truncates and splits it at
// Telegram's limits without ever leaving a tag open.
//
// Limits ([TextLimit], [CaptionLimit]) apply to the visible text after
// parsing, counted in UTF-16 code units as Telegram counts them ([Len]), not
// to the length of the markup. A cut never splits a surrogate pair or falls
// inside a tg-emoji or tg-time element.
//
// The lenient parser keeps the text of tags it drops: the body of a script
// or style element, or an HTML comment, becomes visible words. That suits
// text produced by people or models; escape untrusted text with [Escape]
// instead of sanitizing it.
//
// All functions are pure and safe for concurrent use.
package tghtml
