// A Telegraf bot written the usual way, run by the interop tests against
// `tgrelay sandbox` (MODE=poll) or behind `tgrelay serve` (MODE=webhook).
// Environment as for grammy_bot.mjs. Behind serve it runs Telegraf's stock
// webhook handler, bot.webhookCallback(path, { secretToken }), on the real
// response, with Telegraf's default webhookReply: the handler's first
// eligible call (answerCbQuery, sendChatAction…) becomes the response body,
// which serve performs through its gateway, and the handler goes on. With
// ROOT=header, each update's calls go to the API root serve announces for
// it in Tgrelay-Api-Root, taken exactly as it arrives: the calls made after
// the response ended come from the attempt that completed the update, which
// the gateway still admits (and journals). Telegraf answers 200 even when
// the handler throws, so serve does not retry a Telegraf handler's failure.
import http from 'node:http';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';

const require = createRequire(process.env.TGRELAY_NODE_MODULES + '/');
const { Telegraf, Composer, Markup } = require('telegraf');
const { message, editedMessage } = require('telegraf/filters');

const { TOKEN, API_ROOT, MODE, PORT, SECRET, ROOT } = process.env;
const bot = new Telegraf(TOKEN, { telegram: { apiRoot: API_ROOT } });
const handlers = new Composer();
bot.use(handlers);

const identity = new AsyncLocalStorage();
const attempt = () => identity.getStore()?.attempt ?? '0';

// botFor returns the bot that handles one forward: with ROOT=header, a bot
// whose API root is the one announced for this update, unchanged.
function botFor(root) {
  if (ROOT !== 'header') return bot;
  const b = new Telegraf(TOKEN, { telegram: { apiRoot: root } });
  b.botInfo = bot.botInfo;
  b.use(handlers);
  return b;
}

handlers.start(async (ctx) => {
  await ctx.sendChatAction('typing');
  await ctx.replyWithHTML(`<b>Hello</b>, <i>${ctx.from.first_name}</i>!`, {
    reply_parameters: { message_id: ctx.message.message_id },
    ...Markup.inlineKeyboard([Markup.button.callback('Yes', 'yes'), Markup.button.url('Site', 'https://example.com')]),
  });
});

handlers.action('yes', async (ctx) => {
  await ctx.answerCbQuery('Done'); // the webhook reply: the response ends here
  await ctx.editMessageText('Confirmed ✅');
  await ctx.editMessageReplyMarkup(Markup.inlineKeyboard([Markup.button.callback('Undo', 'undo')]).reply_markup);
  await ctx.reply('Noted');
});

handlers.command('media', async (ctx) => {
  await ctx.replyWithMediaGroup([
    { type: 'photo', media: 'https://example.com/1.jpg', caption: 'one' },
    { type: 'photo', media: 'https://example.com/2.jpg' },
  ]);
  await ctx.replyWithLocation(52.52, 13.405);
  await ctx.replyWithDice({ emoji: '🎯' });
  await ctx.replyWithPoll('Tea or coffee?', ['Tea', 'Coffee']);
  await ctx.replyWithSticker('https://example.com/sticker.webp');
});

handlers.command('caption', async (ctx) => {
  const m = await ctx.replyWithPhoto('https://example.com/p.jpg', { caption: '*bold* caption', parse_mode: 'MarkdownV2' });
  await ctx.telegram.editMessageCaption(ctx.chat.id, m.message_id, undefined, 'new _caption_', { parse_mode: 'MarkdownV2' });
  try {
    await ctx.replyWithMarkdownV2('broken. markdown');
  } catch (err) {
    await ctx.reply(`refused: ${err.response.description}`);
  }
});

handlers.on(message('photo'), async (ctx) => {
  const photo = ctx.message.photo.at(-1);
  const link = await ctx.telegram.getFileLink(photo.file_id);
  const res = await fetch(link);
  const body = Buffer.from(await res.arrayBuffer());
  await ctx.reply(`photo: ${body.length} bytes: ${body.toString()}`, { reply_parameters: { message_id: ctx.message.message_id } });
});

handlers.on(message('location'), (ctx) => ctx.reply(`at ${ctx.message.location.latitude},${ctx.message.location.longitude}`));

handlers.on(editedMessage('text'), (ctx) => ctx.reply(`edited: ${ctx.editedMessage.text}`));

handlers.on('inline_query', (ctx) => ctx.answerInlineQuery([
  { type: 'article', id: '1', title: 'Echo', input_message_content: { message_text: ctx.inlineQuery.query } },
], { cache_time: 0 }));

handlers.command('info', async (ctx) => {
  const chat = await ctx.getChat();
  const me = await ctx.getChatMember(ctx.from.id);
  const count = await ctx.getChatMembersCount();
  const admins = await ctx.getChatAdministrators();
  await ctx.pinChatMessage(ctx.message.message_id);
  await ctx.unpinChatMessage(ctx.message.message_id);
  await ctx.reply(`info: ${chat.title} ${me.status} members=${count} admins=${admins.length}`);
});

handlers.command('react', async (ctx) => {
  await ctx.react('👍');
  const a = await ctx.reply('temporary 1');
  const b = await ctx.reply('temporary 2');
  await ctx.telegram.deleteMessages(ctx.chat.id, [a.message_id, b.message_id]);
  await ctx.reply('reacted');
});

handlers.command('boom', () => { throw new Error('boom always fails'); });

handlers.command('flaky', async (ctx) => {
  if (attempt() === '1') throw new Error('flaky handler fails on attempt 1');
  await ctx.reply(`recovered on attempt ${attempt()}`);
});

async function main() {
  await bot.telegram.setMyCommands([
    { command: 'start', description: 'Say hello' },
    { command: 'media', description: 'Send media' },
  ]);
  const cmds = await bot.telegram.getMyCommands();
  if (cmds.length !== 2) throw new Error(`getMyCommands returned ${JSON.stringify(cmds)}`);
  await bot.telegram.setChatMenuButton({ menuButton: { type: 'commands' } });
  await bot.telegram.callApi('getMyName', {});

  if (MODE === 'poll') {
    bot.launch(() => console.log('READY'));
    return;
  }
  bot.botInfo = await bot.telegram.getMe();
  let seenRoot = false;
  const server = http.createServer((req, res) => {
    const root = req.headers['tgrelay-api-root'];
    if (ROOT === 'header') {
      if (!root) { console.error('no Tgrelay-Api-Root: is the gateway off?'); res.writeHead(500).end(); return; }
      if (!seenRoot) { seenRoot = true; console.log(`ROOT ${root}`); }
    }
    const id = { updateId: req.headers['tgrelay-update-id'], attempt: req.headers['tgrelay-attempt'], claimId: req.headers['tgrelay-claim-id'] };
    // The stock webhook handler on the real response, its secret check
    // configured the documented way (a mismatch is answered 403). It ends
    // the response itself; a handler's error reaches this catch only after
    // Telegraf answered 200.
    const callback = botFor(root).webhookCallback('/', { secretToken: SECRET || undefined });
    identity.run(id, () => callback(req, res)).catch((err) => console.error(`handler failed: ${err.message}`));
  });
  server.listen(Number(PORT), '127.0.0.1', () => console.log(`READY ${server.address().port}`));
}

main().catch((err) => { console.error(err); process.exit(1); });
