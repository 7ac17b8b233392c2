// The success messages (`{"message": …}`), beside the errors (catalog.ts): `fr` the spec's, `en`
// beside it. `code` is the id an operator's messages file overrides them by; no error has it.
export const SUCCESS = {
  userCreated: { code: 'user_created', fr: 'Utilisateur créé', en: 'User created' },
  loggedOut: { code: 'logged_out', fr: 'Déconnexion réussie', en: 'Logged out' },
  resetLinkSent: { code: 'reset_link_sent', fr: 'Si un compte existe pour cet email, un lien de réinitialisation vient d’être envoyé',
    en: 'If an account exists for this email, a reset link has just been sent' },
  passwordReset: { code: 'password_reset', fr: 'Mot de passe réinitialisé', en: 'Password reset' },
  emailVerified: { code: 'email_verified', fr: 'Email vérifié', en: 'Email verified' },
  emailAlreadyVerified: { code: 'email_already_verified', fr: 'Email déjà vérifié', en: 'Email already verified' },
  verificationLinkSent: { code: 'verification_link_sent', fr: 'Lien de vérification envoyé', en: 'Verification link sent' },
  magicLinkSent: { code: 'magic_link_sent', fr: 'Si un compte existe pour cet email, un lien de connexion vient d’être envoyé',
    en: 'If an account exists for this email, a sign-in link has just been sent' },
  sessionRevoked: { code: 'session_revoked', fr: 'Session révoquée', en: 'Session revoked' },
  accountDeleted: { code: 'account_deleted', fr: 'Compte supprimé', en: 'Account deleted' },
  apiKeyRevoked: { code: 'api_key_revoked', fr: 'Clé API révoquée', en: 'API key revoked' },
  webhookDeleted: { code: 'webhook_deleted', fr: 'Webhook supprimé', en: 'Webhook deleted' },
  passkeyDeleted: { code: 'passkey_deleted', fr: 'Clé d’accès supprimée', en: 'Passkey deleted' },
  providerUnlinked: { code: 'provider_unlinked', fr: 'Fournisseur retiré', en: 'Provider unlinked' },
  localeChanged: { code: 'locale_changed', fr: 'Langue modifiée', en: 'Language changed' },
  mfaRemoved: { code: 'mfa_removed', fr: 'Second facteur supprimé', en: 'Second factor removed' },
  // The admin API and the console (operators).
  sessionsRevoked: { code: 'sessions_revoked', fr: 'Sessions révoquées', en: 'Sessions revoked' },
  mfaReset: { code: 'mfa_reset', fr: 'Second facteur retiré', en: 'Second factor removed' },
  alertAccepted: { code: 'alert_accepted', fr: 'Alerte acceptée', en: 'Alert accepted' },
  consoleSignedOut: { code: 'console_signed_out', fr: 'Session terminée', en: 'Session ended' },
} as const satisfies Record<string, { code: string; fr: string; en: string }>;
