package wire

import (
	"strconv"
	"strings"
)

// HeaderAPIRoot carries the per-attempt Bot API root ([AttemptRoot]) on an
// update forward, when the forward knows the gateway's address: a call
// made under it carries the attempt's identity. Its value is
//
//	<gateway base URL>/a/<update id>/<attempt>/<claim id>/bot
//
// with no trailing slash, such as "http://127.0.0.1:8081/a/7/1/c-9/bot".
// An app hands it unchanged to its library as the API root of the calls it
// makes for that update:
//
//	grammY                 new Bot(token, {client: {apiRoot: root}})          root + "/bot<token>/<method>"
//	Telegraf               new Telegraf(token, {telegram: {apiRoot: root}})   URL("./bot<token>/<method>", root)
//	node-telegram-bot-api  {baseApiUrl: root}                                  root + "/bot<token>/<method>"
//	python-telegram-bot    Bot(token, base_url=root,                          root + "<token>/<method>"
//	                           base_file_url=root + "/file/bot")
//	aiogram                TelegramAPIServer.from_base(root)                  root + "/bot<token>/<method>"
//	go-telegram/bot        bot.WithServerURL(root)                            root + "/bot<token>/<method>"
//	telego                 telego.WithAPIServer(root)                         root + "/bot<token>/<method>"
//
// The gateway routes each of these forms (and the same with a doubled
// slash, from a root given a trailing slash by hand) to the attempt's
// call; the last segment "bot" ([RootSuffix]) is what lets
// python-telegram-bot append the token directly and Telegraf drop the last
// segment when it resolves the call's relative URL. A file download is
// root + "/file/bot<token>/<path>" (Telegraf's getFileLink: resolved,
// likewise).
const HeaderAPIRoot = "Tgrelay-Api-Root"

// AttemptPrefix starts the path of a per-attempt API root:
// /a/<update id>/<attempt>/<claim id>/… carries that identity.
const AttemptPrefix = "/a/"

// RootSuffix ends every API root the gateway announces: a last path
// segment "bot" that the gateway routes with or without, so that a library
// that appends "/bot<token>/<method>", one that appends "<token>/<method>"
// and one that resolves "./bot<token>/<method>" against the root all reach
// the same call.
const RootSuffix = "/bot"

// AttemptRoot returns the per-attempt API root of an attempt under the
// gateway's base URL (such as "http://127.0.0.1:8081", trailing slashes
// ignored): base + "/a/<update id>/<attempt>/<claim id>" + [RootSuffix],
// the value of [HeaderAPIRoot]. [CutAttemptPath] and [ParseIdentity] read
// it back.
func AttemptRoot(base string, updateID int64, attempt int, claimID string) string {
	return strings.TrimRight(base, "/") + AttemptPrefix + strconv.FormatInt(updateID, 10) + "/" +
		strconv.Itoa(attempt) + "/" + claimID + RootSuffix
}

// CutAttemptPath splits the path of a call made under a per-attempt API
// root, "/a/<update id>/<attempt>/<claim id>/<rest>", into the identity's
// three parts, as written, and "/<rest>" (the call's own path, such as
// "/bot/bot<token>/sendMessage"). ok is false when p does not start with
// [AttemptPrefix] or has fewer segments; the parts are not checked: pass
// them to [ParseIdentity].
func CutAttemptPath(p string) (updateID, attempt, claimID, rest string, ok bool) {
	tail, found := strings.CutPrefix(p, AttemptPrefix)
	if !found {
		return "", "", "", "", false
	}
	parts := strings.SplitN(tail, "/", 4)
	if len(parts) < 4 {
		return "", "", "", "", false
	}
	return parts[0], parts[1], parts[2], "/" + parts[3], true
}

// BotMethod returns the method of a Bot API URL path
// ("…/bot<token>/<method>"), or false for any other path: a file download
// ("/file/bot<token>/<path>"), a path that ends in the token, a request
// that is no Bot API call. It is the one rule for what a call's method is,
// for the limiter and for the transport's results.
func BotMethod(path string) (string, bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", false
	}
	method, rest := path[i+1:], path[:i]
	seg := rest[strings.LastIndexByte(rest, '/')+1:]
	if method == "" || !strings.HasPrefix(seg, "bot") || strings.HasSuffix(rest[:len(rest)-len(seg)], "/file/") {
		return "", false
	}
	return method, true
}
