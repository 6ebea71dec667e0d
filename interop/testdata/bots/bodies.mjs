// Sends the common Bot API calls with a real framework's own request
// building (FRAMEWORK=grammy or telegraf), the way their documentation
// writes them, and prints one line per call:
//
//	RESULT <case> ok
//	RESULT <case> error <description>
//
// then DONE. TestLibraryBodies (bodies_test.go) captures the bodies on the
// wire and checks each call was accepted.
//
// Environment: TGRELAY_NODE_MODULES, FRAMEWORK, TOKEN, API_ROOT, CHAT (a
// private chat), MSG (a message of the bot's with an inline keyboard, to
// reply to and edit), DEL (a message of the bot's to delete), CALLBACK (a
// callback query to answer).
import { createRequire } from 'node:module';

const require = createRequire(process.env.TGRELAY_NODE_MODULES + '/');
const { FRAMEWORK, TOKEN, API_ROOT } = process.env;
const CHAT = Number(process.env.CHAT);
const MSG = Number(process.env.MSG);
const DEL = Number(process.env.DEL);
const CALLBACK = process.env.CALLBACK;
const jpeg = () => Buffer.from('\xff\xd8\xff\xe0 a tiny jpeg', 'latin1');

// Each case is [name, call]; a call returns a promise.
function grammyCases() {
  const { Bot, InlineKeyboard, Keyboard, InputFile, InputMediaBuilder } = require('grammy');
  const api = new Bot(TOKEN, { client: { apiRoot: API_ROOT } }).api;
  const yesNo = () => new InlineKeyboard().text('Yes', 'yes').text('No', 'no').row()
    .url('Site', 'https://example.com').switchInlineCurrent('Search', 'q');
  return [
    ['sendMessage inline keyboard', () => api.sendMessage(CHAT, 'pick', { reply_markup: yesNo() })],
    ['sendMessage reply keyboard', () => api.sendMessage(CHAT, 'pick', {
      reply_markup: new Keyboard().text('Tea').text('Coffee').row().requestContact('Share phone')
        .resized().oneTime().placeholder('Choose'),
    })],
    ['sendMessage remove keyboard', () => api.sendMessage(CHAT, 'done', { reply_markup: { remove_keyboard: true } })],
    ['sendMessage force reply', () => api.sendMessage(CHAT, 'name?', { reply_markup: { force_reply: true } })],
    ['sendMessage HTML without preview', () => api.sendMessage(CHAT, '<b>bold</b> https://example.com', {
      parse_mode: 'HTML', link_preview_options: { is_disabled: true },
    })],
    ['sendMessage MarkdownV2', () => api.sendMessage(CHAT, '*bold* and 1\\.5', { parse_mode: 'MarkdownV2' })],
    ['sendMessage entities', () => api.sendMessage(CHAT, 'bold', { entities: [{ type: 'bold', offset: 0, length: 4 }] })],
    ['sendMessage reply_parameters', () => api.sendMessage(CHAT, 'reply', { reply_parameters: { message_id: MSG } })],
    ['sendPhoto upload with caption and keyboard', () => api.sendPhoto(CHAT, new InputFile(jpeg(), 'p.jpg'), {
      caption: '<i>photo</i>', parse_mode: 'HTML', reply_markup: yesNo(),
    })],
    ['sendPhoto by URL', () => api.sendPhoto(CHAT, 'https://example.com/p.jpg')],
    ['sendDocument upload', () => api.sendDocument(CHAT, new InputFile(Buffer.from('notes'), 'notes.txt'), {
      caption: 'notes', reply_parameters: { message_id: MSG },
    })],
    ['sendMediaGroup uploads', () => api.sendMediaGroup(CHAT, [
      InputMediaBuilder.photo(new InputFile(jpeg(), 'one.jpg'), { caption: '*one*', parse_mode: 'MarkdownV2' }),
      InputMediaBuilder.photo(new InputFile(jpeg(), 'two.jpg')),
    ])],
    ['editMessageText with keyboard', () => api.editMessageText(CHAT, MSG, '<b>Confirmed</b>', {
      parse_mode: 'HTML', reply_markup: new InlineKeyboard().text('Undo', 'undo'),
    })],
    ['editMessageReplyMarkup', () => api.editMessageReplyMarkup(CHAT, MSG, { reply_markup: new InlineKeyboard().text('Redo', 'redo') })],
    ['answerCallbackQuery', () => api.answerCallbackQuery(CALLBACK, { text: 'Done' })],
    ['deleteMessage', () => api.deleteMessage(CHAT, DEL)],
  ];
}

function telegrafCases() {
  const { Telegraf, Markup, Input } = require('telegraf');
  const tg = new Telegraf(TOKEN, { telegram: { apiRoot: API_ROOT } }).telegram;
  const yesNo = () => Markup.inlineKeyboard([
    [Markup.button.callback('Yes', 'yes'), Markup.button.callback('No', 'no')],
    [Markup.button.url('Site', 'https://example.com'), Markup.button.switchToCurrentChat('Search', 'q')],
  ]);
  return [
    ['sendMessage inline keyboard', () => tg.sendMessage(CHAT, 'pick', yesNo())],
    ['sendMessage reply keyboard', () => tg.sendMessage(CHAT, 'pick', Markup.keyboard([
      ['Tea', 'Coffee'], [Markup.button.contactRequest('Share phone')],
    ]).resize().oneTime().placeholder('Choose'))],
    ['sendMessage remove keyboard', () => tg.sendMessage(CHAT, 'done', Markup.removeKeyboard())],
    ['sendMessage force reply', () => tg.sendMessage(CHAT, 'name?', Markup.forceReply())],
    ['sendMessage HTML without preview', () => tg.sendMessage(CHAT, '<b>bold</b> https://example.com', {
      parse_mode: 'HTML', link_preview_options: { is_disabled: true },
    })],
    ['sendMessage MarkdownV2', () => tg.sendMessage(CHAT, '*bold* and 1\\.5', { parse_mode: 'MarkdownV2' })],
    ['sendMessage entities', () => tg.sendMessage(CHAT, 'bold', { entities: [{ type: 'bold', offset: 0, length: 4 }] })],
    ['sendMessage reply_parameters', () => tg.sendMessage(CHAT, 'reply', { reply_parameters: { message_id: MSG } })],
    ['sendPhoto upload with caption and keyboard', () => tg.sendPhoto(CHAT, Input.fromBuffer(jpeg(), 'p.jpg'), {
      caption: '<i>photo</i>', parse_mode: 'HTML', ...yesNo(),
    })],
    ['sendPhoto by URL', () => tg.sendPhoto(CHAT, Input.fromURL('https://example.com/p.jpg'))],
    ['sendDocument upload', () => tg.sendDocument(CHAT, Input.fromBuffer(Buffer.from('notes'), 'notes.txt'), {
      caption: 'notes', reply_parameters: { message_id: MSG },
    })],
    ['sendMediaGroup uploads', () => tg.sendMediaGroup(CHAT, [
      { type: 'photo', media: Input.fromBuffer(jpeg(), 'one.jpg'), caption: '*one*', parse_mode: 'MarkdownV2' },
      { type: 'photo', media: Input.fromBuffer(jpeg(), 'two.jpg') },
    ])],
    ['editMessageText with keyboard', () => tg.editMessageText(CHAT, MSG, undefined, '<b>Confirmed</b>', {
      parse_mode: 'HTML', ...Markup.inlineKeyboard([Markup.button.callback('Undo', 'undo')]),
    })],
    ['editMessageReplyMarkup', () => tg.editMessageReplyMarkup(CHAT, MSG, undefined,
      Markup.inlineKeyboard([Markup.button.callback('Redo', 'redo')]).reply_markup)],
    ['answerCallbackQuery', () => tg.answerCbQuery(CALLBACK, 'Done')],
    ['deleteMessage', () => tg.deleteMessage(CHAT, DEL)],
  ];
}

const cases = FRAMEWORK === 'grammy' ? grammyCases() : telegrafCases();
// One call at a time, so the captured bodies are in the cases' order.
for (const [name, call] of cases) {
  try {
    await call();
    console.log(`RESULT ${name} ok`);
  } catch (err) {
    console.log(`RESULT ${name} error ${err.description ?? err.message}`);
  }
}
console.log('DONE');
