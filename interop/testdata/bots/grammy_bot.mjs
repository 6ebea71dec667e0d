// A grammY bot written the usual way, run by the interop tests against
// `tgrelay sandbox` (MODE=poll: long polling) or behind `tgrelay serve`
// (MODE=webhook: serve forwards each update to this process).
//
// Environment: TOKEN, API_ROOT, MODE, PORT (webhook), SECRET (webhook: the
// app secret serve sends in X-Telegram-Bot-Api-Secret-Token),
// TGRELAY_NODE_MODULES (where grammy is installed).
import http from 'node:http';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';

const require = createRequire(process.env.TGRELAY_NODE_MODULES + '/');
const { Bot, webhookCallback, InlineKeyboard } = require('grammy');

const { TOKEN, API_ROOT, MODE, PORT, SECRET, REPLIES } = process.env;
// REPLIES=webhook (behind serve's gateway): answer chat actions and
// callback queries in the webhook response, which the relay performs.
const canUseWebhookReply = REPLIES === 'webhook' ? (m) => m === 'sendChatAction' || m === 'answerCallbackQuery' : undefined;
const bot = new Bot(TOKEN, { client: { apiRoot: API_ROOT, canUseWebhookReply } });

// The relay's identity headers of the forward being handled (webhook mode).
const identity = new AsyncLocalStorage();
const attempt = () => identity.getStore()?.attempt ?? '0';

bot.command('start', async (ctx) => {
  await ctx.replyWithChatAction('typing');
  await ctx.reply(`<b>Hello</b>, <i>${ctx.from.first_name}</i>!`, {
    parse_mode: 'HTML',
    reply_parameters: { message_id: ctx.msg.message_id },
    reply_markup: new InlineKeyboard().text('Yes', 'yes').url('Site', 'https://example.com'),
  });
});

bot.callbackQuery('yes', async (ctx) => {
  await ctx.answerCallbackQuery({ text: 'Done' });
  await ctx.editMessageText('Confirmed ✅');
  await ctx.editMessageReplyMarkup({ reply_markup: new InlineKeyboard().text('Undo', 'undo') });
});

bot.command('media', async (ctx) => {
  await ctx.replyWithMediaGroup([
    { type: 'photo', media: 'https://example.com/1.jpg', caption: 'one' },
    { type: 'photo', media: 'https://example.com/2.jpg' },
  ]);
  await ctx.replyWithLocation(52.52, 13.405);
  await ctx.replyWithDice('🎯');
  await ctx.replyWithPoll('Tea or coffee?', [{ text: 'Tea' }, { text: 'Coffee' }]);
  await ctx.replyWithSticker('https://example.com/sticker.webp');
});

bot.command('caption', async (ctx) => {
  const m = await ctx.replyWithPhoto('https://example.com/p.jpg', { caption: '*bold* caption', parse_mode: 'MarkdownV2' });
  await ctx.api.editMessageCaption(ctx.chat.id, m.message_id, { caption: 'new _caption_', parse_mode: 'MarkdownV2' });
  try {
    await ctx.reply('broken. markdown', { parse_mode: 'MarkdownV2' });
  } catch (err) {
    await ctx.reply(`refused: ${err.description}`);
  }
});

bot.on('message:photo', async (ctx) => {
  const file = await ctx.getFile();
  const res = await fetch(`${API_ROOT}/file/bot${TOKEN}/${file.file_path}`);
  const body = Buffer.from(await res.arrayBuffer());
  await ctx.reply(`photo: ${body.length} bytes: ${body.toString()}`, { reply_parameters: { message_id: ctx.msg.message_id } });
});

bot.on('message:location', (ctx) => ctx.reply(`at ${ctx.msg.location.latitude},${ctx.msg.location.longitude}`));

bot.on('edited_message:text', (ctx) => ctx.reply(`edited: ${ctx.editedMessage.text}`));

bot.on('inline_query', (ctx) => ctx.answerInlineQuery([
  { type: 'article', id: '1', title: 'Echo', input_message_content: { message_text: ctx.inlineQuery.query } },
], { cache_time: 0 }));

bot.command('info', async (ctx) => {
  const chat = await ctx.getChat();
  const me = await ctx.getChatMember(ctx.from.id);
  const count = await ctx.getChatMemberCount();
  const admins = await ctx.getChatAdministrators();
  await ctx.pinChatMessage(ctx.msg.message_id);
  await ctx.unpinChatMessage(ctx.msg.message_id);
  await ctx.reply(`info: ${chat.title} ${me.status} members=${count} admins=${admins.length}`);
});

bot.command('react', async (ctx) => {
  await ctx.react('👍');
  const a = await ctx.reply('temporary 1');
  const b = await ctx.reply('temporary 2');
  await ctx.api.deleteMessages(ctx.chat.id, [a.message_id, b.message_id]);
  await ctx.reply('reacted');
});

bot.command('boom', () => { throw new Error('boom always fails'); });

// Fails on its first attempt, so the relay retries it (webhook mode).
bot.command('flaky', async (ctx) => {
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
  // grammY's webhookCallback rethrows a handler's error: without this
  // wrapper the process dies; with it the relay gets a 500 and retries.
  const callback = webhookCallback(bot, 'http', { secretToken: SECRET || undefined, timeoutMilliseconds: 10_000 });
  const server = http.createServer((req, res) => {
    const id = { updateId: req.headers['tgrelay-update-id'], attempt: req.headers['tgrelay-attempt'], claimId: req.headers['tgrelay-claim-id'] };
    identity.run(id, () => callback(req, res)).catch((err) => {
      console.error(`handler failed: ${err.message}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.listen(Number(PORT), '127.0.0.1', () => console.log(`READY ${server.address().port}`));
}

main().catch((err) => { console.error(err); process.exit(1); });
