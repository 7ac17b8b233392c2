// The mail room's one door (CONTRACT §20): the words of the account mails, in the user's language,
// from the built-in texts or the operator's templates (`mail.templates`), each value escaped for
// where it stands. Sending is the account system's (auth/mail.ts); this room only says what a mail
// says, and imports nothing above the errors room, so config/files.ts can check the folder.
export { MAIL_KINDS, PLACEHOLDERS, readMailTemplates, renderMail, templateProblems, type MailKind, type MailTemplate, type MailValues, type RenderedMail } from './templates.js';
export { MailTemplatesError, MailWords, mailWordsOf, productName, type MailWordsSettings } from './words.js';
