// A Telegraf bot written the usual way, run by the interop tests against
// `tgrelay sandbox` (MODE=poll) or behind `tgrelay serve` (MODE=webhook).
// Environment as for grammy_bot.mjs.
import http from 'node:http';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createRequire } from 'node:module';

const require = createRequire(process.env.TGRELAY_NODE_MODULES + '/');
const { Telegraf, Markup } = require('telegraf');
const { message, editedMessage } = require('telegraf/filters');

const { TOKEN, API_ROOT, MODE, PORT, SECRET, REPLIES } = process.env;
// webhookReply: false — Telegraf would otherwise answer some calls
// (answerCbQuery, sendChatAction, deleteMessage…) in the webhook response
// body, which the relay performs only through its gateway (REPLIES=webhook).
const webhookReply = REPLIES === 'webhook';
const bot = new Telegraf(TOKEN, { telegram: { apiRoot: API_ROOT, webhookReply } });

const identity = new AsyncLocalStorage();
const attempt = () => identity.getStore()?.attempt ?? '0';

bot.start(async (ctx) => {
  await ctx.sendChatAction('typing');
  await ctx.replyWithHTML(`<b>Hello</b>, <i>${ctx.from.first_name}</i>!`, {
    reply_parameters: { message_id: ctx.message.message_id },
    ...Markup.inlineKeyboard([Markup.button.callback('Yes', 'yes'), Markup.button.url('Site', 'https://example.com')]),
  });
});

bot.action('yes', async (ctx) => {
  await ctx.answerCbQuery('Done');
  await ctx.editMessageText('Confirmed ✅');
  await ctx.editMessageReplyMarkup(Markup.inlineKeyboard([Markup.button.callback('Undo', 'undo')]).reply_markup);
});

bot.command('media', async (ctx) => {
  await ctx.replyWithMediaGroup([
    { type: 'photo', media: 'https://example.com/1.jpg', caption: 'one' },
    { type: 'photo', media: 'https://example.com/2.jpg' },
  ]);
  await ctx.replyWithLocation(52.52, 13.405);
  await ctx.replyWithDice({ emoji: '🎯' });
  await ctx.replyWithPoll('Tea or coffee?', ['Tea', 'Coffee']);
  await ctx.replyWithSticker('https://example.com/sticker.webp');
});

bot.command('caption', async (ctx) => {
  const m = await ctx.replyWithPhoto('https://example.com/p.jpg', { caption: '*bold* caption', parse_mode: 'MarkdownV2' });
  await ctx.telegram.editMessageCaption(ctx.chat.id, m.message_id, undefined, 'new _caption_', { parse_mode: 'MarkdownV2' });
  try {
    await ctx.replyWithMarkdownV2('broken. markdown');
  } catch (err) {
    await ctx.reply(`refused: ${err.response.description}`);
  }
});

bot.on(message('photo'), async (ctx) => {
  const photo = ctx.message.photo.at(-1);
  const link = await ctx.telegram.getFileLink(photo.file_id);
  const res = await fetch(link);
  const body = Buffer.from(await res.arrayBuffer());
  await ctx.reply(`photo: ${body.length} bytes: ${body.toString()}`, { reply_parameters: { message_id: ctx.message.message_id } });
});

bot.on(message('location'), (ctx) => ctx.reply(`at ${ctx.message.location.latitude},${ctx.message.location.longitude}`));

bot.on(editedMessage('text'), (ctx) => ctx.reply(`edited: ${ctx.editedMessage.text}`));

bot.on('inline_query', (ctx) => ctx.answerInlineQuery([
  { type: 'article', id: '1', title: 'Echo', input_message_content: { message_text: ctx.inlineQuery.query } },
], { cache_time: 0 }));

bot.command('info', async (ctx) => {
  const chat = await ctx.getChat();
  const me = await ctx.getChatMember(ctx.from.id);
  const count = await ctx.getChatMembersCount();
  const admins = await ctx.getChatAdministrators();
  await ctx.pinChatMessage(ctx.message.message_id);
  await ctx.unpinChatMessage(ctx.message.message_id);
  await ctx.reply(`info: ${chat.title} ${me.status} members=${count} admins=${admins.length}`);
});

bot.command('react', async (ctx) => {
  await ctx.react('👍');
  const a = await ctx.reply('temporary 1');
  const b = await ctx.reply('temporary 2');
  await ctx.telegram.deleteMessages(ctx.chat.id, [a.message_id, b.message_id]);
  await ctx.reply('reacted');
});

bot.command('boom', () => { throw new Error('boom always fails'); });

bot.command('flaky', async (ctx) => {
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
  // Telegraf's stock webhookCallback answers 200 even when a handler
  // throws, so the relay would never retry: handle the update ourselves and
  // answer 500 on failure.
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST') { res.writeHead(405).end(); return; }
    if (SECRET && req.headers['x-telegram-bot-api-secret-token'] !== SECRET) { res.writeHead(401).end(); return; }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const id = { updateId: req.headers['tgrelay-update-id'], attempt: req.headers['tgrelay-attempt'], claimId: req.headers['tgrelay-claim-id'] };
      identity.run(id, async () => {
        // With webhook replies on, Telegraf writes its reply into the
        // response it is given, and ends it (200) even when the handler
        // throws: give it a stand-in, and answer for real only once the
        // handler's outcome is known.
        const reply = {
          writableEnded: false, headersSent: false, body: undefined,
          setHeader() {}, end(body) { this.body = body; this.writableEnded = true; },
        };
        try {
          await bot.handleUpdate(JSON.parse(Buffer.concat(chunks)), webhookReply ? reply : undefined);
          if (reply.body) res.writeHead(200, { 'content-type': 'application/json' }).end(reply.body);
          else res.writeHead(200).end();
        } catch (err) {
          console.error(`handler failed: ${err.message}`);
          res.writeHead(500).end(); // the reply, if any, is dropped: the retry makes it again
        }
      });
    });
  });
  server.listen(Number(PORT), '127.0.0.1', () => console.log(`READY ${server.address().port}`));
}

main().catch((err) => { console.error(err); process.exit(1); });
