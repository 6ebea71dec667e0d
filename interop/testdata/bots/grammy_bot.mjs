// A grammY bot written the usual way, run by the interop tests against
// `tgrelay sandbox` (MODE=poll: long polling) or behind `tgrelay serve`
// (MODE=webhook: serve forwards each update to this process).
//
// Environment: TOKEN, API_ROOT (the Bot API root of the calls outside an
// update), MODE, PORT (webhook), SECRET (webhook: the app secret serve
// sends in X-Telegram-Bot-Api-Secret-Token, checked by grammY's
// secretToken option), ROOT=header (webhook behind serve's gateway: each
// update's calls go to the API root serve announces for it in
// Tgrelay-Api-Root, taken exactly as it arrives), REPLIES=webhook (answer
// chat actions and callback queries in the webhook response, which the
// relay performs through its gateway), TGRELAY_NODE_MODULES (where grammy
// is installed).
import http from 'node:http';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';

const require = createRequire(process.env.TGRELAY_NODE_MODULES + '/');
const { Bot, Composer, webhookCallback, InlineKeyboard } = require('grammy');

const { TOKEN, API_ROOT, MODE, PORT, SECRET, REPLIES, ROOT } = process.env;
const canUseWebhookReply = REPLIES === 'webhook' ? (m) => m === 'sendChatAction' || m === 'answerCallbackQuery' : undefined;
const bot = new Bot(TOKEN, { client: { apiRoot: API_ROOT, canUseWebhookReply } });
const handlers = new Composer();
bot.use(handlers);

// The relay's identity headers and API root of the forward being handled
// (webhook mode).
const identity = new AsyncLocalStorage();
const attempt = () => identity.getStore()?.attempt ?? '0';
const apiRoot = () => (ROOT === 'header' && identity.getStore()?.root) || API_ROOT;

// botFor returns the bot that handles one forward: with ROOT=header, a bot
// whose API root is the one announced for this update, unchanged.
function botFor(root) {
  if (ROOT !== 'header') return bot;
  const b = new Bot(TOKEN, { botInfo: bot.botInfo, client: { apiRoot: root, canUseWebhookReply } });
  b.use(handlers);
  return b;
}

handlers.command('start', async (ctx) => {
  await ctx.replyWithChatAction('typing');
  await ctx.reply(`<b>Hello</b>, <i>${ctx.from.first_name}</i>!`, {
    parse_mode: 'HTML',
    reply_parameters: { message_id: ctx.msg.message_id },
    reply_markup: new InlineKeyboard().text('Yes', 'yes').url('Site', 'https://example.com'),
  });
});

handlers.callbackQuery('yes', async (ctx) => {
  await ctx.answerCallbackQuery({ text: 'Done' });
  await ctx.editMessageText('Confirmed ✅');
  await ctx.editMessageReplyMarkup({ reply_markup: new InlineKeyboard().text('Undo', 'undo') });
  await ctx.reply('Noted');
});

handlers.command('media', async (ctx) => {
  await ctx.replyWithMediaGroup([
    { type: 'photo', media: 'https://example.com/1.jpg', caption: 'one' },
    { type: 'photo', media: 'https://example.com/2.jpg' },
  ]);
  await ctx.replyWithLocation(52.52, 13.405);
  await ctx.replyWithDice('🎯');
  await ctx.replyWithPoll('Tea or coffee?', [{ text: 'Tea' }, { text: 'Coffee' }]);
  await ctx.replyWithSticker('https://example.com/sticker.webp');
});

handlers.command('caption', async (ctx) => {
  const m = await ctx.replyWithPhoto('https://example.com/p.jpg', { caption: '*bold* caption', parse_mode: 'MarkdownV2' });
  await ctx.api.editMessageCaption(ctx.chat.id, m.message_id, { caption: 'new _caption_', parse_mode: 'MarkdownV2' });
  try {
    await ctx.reply('broken. markdown', { parse_mode: 'MarkdownV2' });
  } catch (err) {
    await ctx.reply(`refused: ${err.description}`);
  }
});

handlers.on('message:photo', async (ctx) => {
  const file = await ctx.getFile();
  const res = await fetch(`${apiRoot()}/file/bot${TOKEN}/${file.file_path}`); // as grammY's files plugin builds it
  const body = Buffer.from(await res.arrayBuffer());
  await ctx.reply(`photo: ${body.length} bytes: ${body.toString()}`, { reply_parameters: { message_id: ctx.msg.message_id } });
});

handlers.on('message:location', (ctx) => ctx.reply(`at ${ctx.msg.location.latitude},${ctx.msg.location.longitude}`));

handlers.on('edited_message:text', (ctx) => ctx.reply(`edited: ${ctx.editedMessage.text}`));

handlers.on('inline_query', (ctx) => ctx.answerInlineQuery([
  { type: 'article', id: '1', title: 'Echo', input_message_content: { message_text: ctx.inlineQuery.query } },
], { cache_time: 0 }));

handlers.command('info', async (ctx) => {
  const chat = await ctx.getChat();
  const me = await ctx.getChatMember(ctx.from.id);
  const count = await ctx.getChatMemberCount();
  const admins = await ctx.getChatAdministrators();
  await ctx.pinChatMessage(ctx.msg.message_id);
  await ctx.unpinChatMessage(ctx.msg.message_id);
  await ctx.reply(`info: ${chat.title} ${me.status} members=${count} admins=${admins.length}`);
});

handlers.command('react', async (ctx) => {
  await ctx.react('👍');
  const a = await ctx.reply('temporary 1');
  const b = await ctx.reply('temporary 2');
  await ctx.api.deleteMessages(ctx.chat.id, [a.message_id, b.message_id]);
  await ctx.reply('reacted');
});

handlers.command('boom', () => { throw new Error('boom always fails'); });

// Fails on its first attempt, so the relay retries it (webhook mode).
handlers.command('flaky', async (ctx) => {
  if (attempt() === '1') throw new Error('flaky handler fails on attempt 1');
  await ctx.reply(`recovered on attempt ${attempt()}`);
});

async function main() {
  // What bots do at start-up; each must succeed.
  await bot.api.setMyCommands([
    { command: 'start', description: 'Say hello' },
    { command: 'media', description: 'Send media' },
  ]);
  const cmds = await bot.api.getMyCommands();
  if (cmds.length !== 2) throw new Error(`getMyCommands returned ${JSON.stringify(cmds)}`);
  await bot.api.setChatMenuButton({ menu_button: { type: 'commands' } });
  await bot.api.getMyName();

  if (MODE === 'poll') {
    await bot.api.deleteWebhook();
    bot.start({ timeout: 1, onStart: () => console.log('READY') });
    return;
  }
  await bot.init();
  const server = http.createServer((req, res) => {
    const root = req.headers['tgrelay-api-root'];
    if (ROOT === 'header') {
      if (!root) { console.error('no Tgrelay-Api-Root: is the gateway off?'); res.writeHead(500).end(); return; }
      if (!seenRoot) { seenRoot = true; console.log(`ROOT ${root}`); }
    }
    const id = { updateId: req.headers['tgrelay-update-id'], attempt: req.headers['tgrelay-attempt'], claimId: req.headers['tgrelay-claim-id'], root };
    // grammY's webhookCallback rethrows a handler's error: without this
    // wrapper the process dies; with it the relay gets a 500 and retries.
    const callback = webhookCallback(botFor(root), 'http', { secretToken: SECRET || undefined, timeoutMilliseconds: 10_000 });
    identity.run(id, () => callback(req, res)).catch((err) => {
      console.error(`handler failed: ${err.message}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.listen(Number(PORT), '127.0.0.1', () => console.log(`READY ${server.address().port}`));
}

let seenRoot = false;

main().catch((err) => { console.error(err); process.exit(1); });
