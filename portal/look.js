// The product's accent colour, set through the CSS object model: the CSP allows no style attribute
// written as markup and no inline <style>, and a custom property on the root is all the sheet reads.
export function applyAccent(accent) {
  if (!/^#[0-9a-fA-F]{6}$/.test(accent ?? '')) return;
  const root = document.documentElement.style;
  root.setProperty('--accent', accent);
  // Text on the accent: white or near-black, whichever contrasts more (WCAG's relative luminance).
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(accent.slice(i, i + 2), 16) / 255).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  root.setProperty('--on-accent', 1.05 / (luminance + 0.05) >= (luminance + 0.05) / 0.05 ? '#ffffff' : '#111111');
  // Links and outlines on the white page use the accent only when it is dark enough to read (4.5:1).
  root.setProperty('--link', 1.05 / (luminance + 0.05) >= 4.5 ? accent : '#1a4fb5');
}
