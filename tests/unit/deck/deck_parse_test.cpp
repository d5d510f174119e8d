// parse_deck and read_deck_file: defaults, overrides, the written deck reading back, and one
// test per kind of user mistake (each must name the key and fit on one line).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/deck.h"            // parse_deck, read_deck_file, ResolvedDeck
#include "io/deck_schema.h"     // deck_schema
#include "io/user_error.h"      // UserError
#include "tests/unit/deck/deck_test_support.h"  // user_error_of

namespace trident::io {
namespace {

using testing_support::user_error_of;
using Overrides = std::vector<std::string>;

std::string parse_error(const std::string& deck_text, const Overrides& overrides = {}) {
  return user_error_of([&] { parse_deck(deck_text, "quickstart.ini", overrides); });
}

TEST(DeckParse, EmptyDeckGivesEveryKeyItsDefaultInSchemaOrder) {
  const ResolvedDeck deck = parse_deck("", "empty.ini", {});
  const std::vector<KeySpec>& schema = deck_schema();
  ASSERT_EQ(deck.entries().size(), schema.size());
  for (size_t i = 0; i < schema.size(); ++i) {
    EXPECT_EQ(deck.entries()[i].first, schema[i].name);
    EXPECT_EQ(deck.entries()[i].second, schema[i].default_text) << schema[i].name;
  }
  EXPECT_EQ(deck.value("train.steps"), "100");
  EXPECT_EQ(deck.value("optim.lr"), "6e-4");
  EXPECT_EQ(deck.value("run.device"), "cpu");
}

TEST(DeckParse, DeckValuesReplaceDefaultsAndCommentsAreIgnored) {
  const ResolvedDeck deck = parse_deck(
      "# a small run\n[train]\nsteps = 50   # fifty\n\n[model]\n  layers=2\nheads = 2\n",
      "small.ini", {});
  EXPECT_EQ(deck.value("train.steps"), "50");
  EXPECT_EQ(deck.value("model.layers"), "2");
  EXPECT_EQ(deck.value("model.heads"), "2");
  EXPECT_EQ(deck.value("model.hidden"), "768");
}

TEST(DeckParse, CommandLineOverrideBeatsDeckInBothSpellings) {
  const ResolvedDeck deck = parse_deck("[train]\nsteps = 50\n[optim]\nlr = 1e-3\n", "d.ini",
                                       {"--train.steps=70", "--optim.lr", "3e-4"});
  EXPECT_EQ(deck.value("train.steps"), "70");
  EXPECT_EQ(deck.value("optim.lr"), "3e-4");
}

TEST(DeckParse, OverrideMayTakeANegativeLookingValueAsNextToken) {
  const std::string message = parse_error("", {"--optim.min_lr", "-1"});
  EXPECT_EQ(message, "optim.min_lr = -1 is out of range (must be >= 0)");
}

TEST(DeckParse, UnknownKeyInDeckSuggestsNearestKey) {
  EXPECT_EQ(parse_error("[train]\nstepz = 5\n"),
            "deck quickstart.ini: unknown key 'train.stepz' (did you mean 'train.steps'?)");
}

TEST(DeckParse, KeyInWrongSectionSuggestsTheRightSection) {
  const std::string message = parse_error("[train]\nlr = 1e-3\n");
  EXPECT_NE(message.find("'train.lr'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'optim.lr'?"), std::string::npos) << message;
}

TEST(DeckParse, KeyOutsideAnySectionIsUnknown) {
  const std::string message = parse_error("steps = 5\n");
  EXPECT_NE(message.find("unknown key 'steps'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'train.steps'?"), std::string::npos) << message;
}

TEST(DeckParse, AnEmptyUnknownSectionIsRefusedNamingItsLine) {
  // A misspelt header whose keys are all commented out would otherwise pass unnoticed.
  const std::string message = parse_error("[train]\nsteps = 5\n\n[optimiser]\n# lr = 1e-3\n");
  EXPECT_EQ(message.rfind("deck quickstart.ini, line 4: [optimiser] is not a section of a Trident deck (the sections "
                          "are ", 0),
            0u)
      << message;
  EXPECT_NE(message.find("optim"), std::string::npos) << message;
  // Keys under an unknown header are still named one by one, with a suggestion.
  EXPECT_NE(parse_error("[optimiser]\nlr = 1e-3\n").find("did you mean 'optim.lr'?"), std::string::npos);
}

TEST(DeckParse, UnknownKeyFarFromEveryKeyGetsNoSuggestion) {
  const std::string message = parse_error("[banana]\nsplit = 3\n");
  EXPECT_NE(message.find("unknown key 'banana.split'"), std::string::npos) << message;
  EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
}

TEST(DeckParse, UnknownKeyOnCommandLineSuggestsNearestKey) {
  EXPECT_EQ(parse_error("", {"--train.micro_bach=4"}),
            "command line: unknown key 'train.micro_bach' (did you mean 'train.micro_batch'?)");
}

TEST(DeckParse, AbbreviatedOverrideIsNotGuessed) {
  const std::string message = parse_error("", {"--train.ste=5"});
  EXPECT_NE(message.find("unknown key 'train.ste'"), std::string::npos) << message;
}

TEST(DeckParse, MalformedIntegerIsRejected) {
  EXPECT_EQ(parse_error("[train]\nsteps = 12x\n"), "train.steps = '12x' is not an integer");
  EXPECT_NE(parse_error("[train]\nsteps = 1.5\n").find("train.steps"), std::string::npos);
  EXPECT_NE(parse_error("[train]\nsteps = 1e3\n").find("is not an integer"), std::string::npos);
  EXPECT_NE(parse_error("[train]\nsteps =\n").find("train.steps = ''"), std::string::npos);
  EXPECT_NE(parse_error("", {"--train.steps=99999999999999999999"}).find("train.steps"),
            std::string::npos);
}

TEST(DeckParse, MalformedFloatIsRejected) {
  EXPECT_EQ(parse_error("[optim]\nlr = abc\n"), "optim.lr = 'abc' is not a number");
  EXPECT_EQ(parse_error("[optim]\nlr = 1e-3x\n"), "optim.lr = '1e-3x' is not a number");
  EXPECT_EQ(parse_error("[optim]\nlr = nan\n"), "optim.lr = 'nan' is not a finite number");
  EXPECT_EQ(parse_error("", {"--optim.eps=inf"}), "optim.eps = 'inf' is not a finite number");
  EXPECT_EQ(parse_error("", {"--optim.eps=1e999"}),
            "optim.eps = '1e999' is beyond what a double holds (magnitudes from about 2e-308 to 1.8e308)");
  EXPECT_EQ(parse_error("", {"--optim.lr=1e-999"}),
            "optim.lr = '1e-999' is beyond what a double holds (magnitudes from about 2e-308 to 1.8e308)");
}

// A checkpoint's saved deck that does not parse names the checkpoint: its text is not the user's.
TEST(DeckParse, ASavedDeckThatDoesNotReadBackNamesTheCheckpoint) {
  try {
    parse_checkpoint_deck("[model]\nlayers = abc\n", "run/checkpoints/step-000000010.h5");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("checkpoint 'run/checkpoints/step-000000010.h5': its saved deck does not "
                                          "read back (model.layers = 'abc' is not an integer",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_EQ(parse_checkpoint_deck("[model]\nlayers = 3\n", "c.h5").value("model.layers"), "3");
}

TEST(DeckParse, ValueOutOfRangeNamesTheRange) {
  EXPECT_EQ(parse_error("[train]\nmicro_batch = 0\n"),
            "train.micro_batch = 0 is out of range (must be >= 1 and <= 16777216)");
  EXPECT_EQ(parse_error("", {"--model.layers=2000"}),
            "model.layers = 2000 is out of range (must be >= 1 and <= 1024)");
  EXPECT_EQ(parse_error("", {"--optim.beta1=1"}),
            "optim.beta1 = 1 is out of range (must be >= 0 and < 1)");
  EXPECT_EQ(parse_error("", {"--optim.lr=0"}),
            "optim.lr = 0 is out of range (must be > 0 and <= 1)");
}

TEST(DeckParse, ValueNotAmongChoicesListsTheChoices) {
  EXPECT_EQ(parse_error("[run]\ndevice = tpu\n"),
            "run.device = 'tpu' is not one of: cpu, cuda, auto");
}

TEST(DeckParse, StringThatWouldNotSurviveTheWrittenDeckIsRejected) {
  EXPECT_NE(parse_error("", {"--data.path=a#b"}).find("data.path"), std::string::npos);
  EXPECT_NE(parse_error("", {"--run.dir= out"}).find("run.dir"), std::string::npos);
  // A control character is shown escaped, so the message stays on one line.
  EXPECT_NE(parse_error("", {"--run.dir=a\nb"}).find("run.dir = 'a\\x0ab'"), std::string::npos);
  EXPECT_NE(parse_error("[run]\ndir =\n").find("run.dir"), std::string::npos);
}

TEST(DeckParse, KeyGivenTwiceInDeckIsAnError) {
  const std::string message = parse_error("[train]\nsteps = 5\n\n[train]\nsteps = 6\n");
  EXPECT_NE(message.find("deck quickstart.ini"), std::string::npos) << message;
  EXPECT_NE(message.find("'train.steps' is given twice"), std::string::npos) << message;
}

TEST(DeckParse, KeyGivenTwiceOnCommandLineIsAnError) {
  const std::string message = parse_error("", {"--train.steps=5", "--train.steps=6"});
  EXPECT_NE(message.find("--train.steps is given twice"), std::string::npos) << message;
}

TEST(DeckParse, OverrideNotOfTheFormDashDashKeyIsRejected) {
  EXPECT_EQ(parse_error("", {"train.steps=5"}),
            "command line: 'train.steps=5' is not an override of the form "
            "--section.key=value");
  EXPECT_NE(parse_error("", {"-s"}).find("'-s' is not an override"), std::string::npos);
  EXPECT_NE(parse_error("", {"--"}).find("'--' is not an override"), std::string::npos);
  EXPECT_NE(parse_error("", {"--train.steps=5", "6"}).find("'6' is not an override"),
            std::string::npos);
}

TEST(DeckParse, OverrideWithoutValueNamesTheKey) {
  EXPECT_EQ(parse_error("", {"--train.steps"}),
            "command line: --train.steps has no value (write --train.steps=VALUE)");
  EXPECT_EQ(parse_error("", {"--train.steps="}),
            "command line: --train.steps has no value (write --train.steps=VALUE)");
  // The next override is not taken for the value, even by a key that takes text.
  EXPECT_EQ(parse_error("", {"--run.dir", "--train.steps=5"}),
            "command line: --run.dir has no value (write --run.dir=VALUE; '--train.steps=5' is taken for the next "
            "override)");
  EXPECT_NE(parse_error("", {"--train.steps", "--run.dir=x"}).find("--train.steps has no value"), std::string::npos);
  // The spaced form itself stands, and a value that starts with "--" is written after "=".
  const ResolvedDeck deck = parse_deck("", "quickstart.ini", {"--run.dir", "out", "--train.steps", "5"});
  EXPECT_EQ(deck.value("run.dir"), "out");
  EXPECT_EQ(deck.value("train.steps"), "5");
  EXPECT_EQ(parse_deck("", "quickstart.ini", {"--run.dir=--odd"}).value("run.dir"), "--odd");
}

TEST(DeckParse, LineWithoutEqualsIsASyntaxErrorWithItsLineNumber) {
  EXPECT_EQ(parse_error("[train]\nsteps = 5\nwarmup 10\n"),
            "deck quickstart.ini, line 3: 'warmup 10' is not a [section] or a key = value "
            "line");
  EXPECT_NE(parse_error("[train\nsteps = 5\n").find("line 1: '[train'"), std::string::npos);
}

// `[ train ]` is the section train, and a UTF-8 byte-order mark (Windows editors) is not part
// of the first line; line numbers stay those of the file.
TEST(DeckParse, SpacedSectionHeadersAndAByteOrderMarkAreRead) {
  const ResolvedDeck deck = parse_deck("\xEF\xBB\xBF[ train ]\nsteps = 5\n[\tmodel ]  # comment\nlayers = 3\n", "w.ini", {});
  EXPECT_EQ(deck.value("train.steps"), "5");
  EXPECT_EQ(deck.value("model.layers"), "3");
  EXPECT_EQ(parse_error("\xEF\xBB\xBF[train]\nsteps = 5\nwarmup 10\n"),
            "deck quickstart.ini, line 3: 'warmup 10' is not a [section] or a key = value line");
}

// Lines end in LF, CRLF (Windows) or a lone CR (classic Mac OS editors): the lone CR was read as
// one long line, whose leading comment hid every key, and the deck ran on its defaults.
TEST(DeckParse, EveryLineEndIsRead) {
  for (const char* end : {"\n", "\r\n", "\r"}) {
    const std::string text = std::string("# a deck") + end + "[model]" + end + "layers = 3" + end + "[train]" + end +
                             "steps = 5  # comment" + end;
    const ResolvedDeck deck = parse_deck(text, "e.ini", {});
    EXPECT_EQ(deck.value("model.layers"), "3") << static_cast<int>(end[0]) << static_cast<int>(end[1]);
    EXPECT_EQ(deck.value("train.steps"), "5");
  }
  EXPECT_EQ(parse_error("[train]\rsteps = 5\rwarmup 10\r"),
            "deck quickstart.ini, line 3: 'warmup 10' is not a [section] or a key = value line");
}

TEST(DeckParse, BooleanValuesAreNormalised) {
  KeySpec flag;
  flag.name = "test.flag";
  flag.type = ValueType::kBool;
  for (const char* truthy : {"true", "1", "yes", "on"}) {
    EXPECT_EQ(canonical_value(flag, truthy), "true") << truthy;
  }
  for (const char* falsy : {"false", "0", "no", "off"}) {
    EXPECT_EQ(canonical_value(flag, falsy), "false") << falsy;
  }
}

TEST(DeckParse, MalformedBooleanIsRejected) {
  KeySpec flag;
  flag.name = "test.flag";
  flag.type = ValueType::kBool;
  const std::string message = user_error_of([&] { canonical_value(flag, "maybe"); });
  EXPECT_EQ(message.rfind("test.flag = 'maybe' is not a boolean", 0), 0u) << message;
}

TEST(DeckParse, NumbersAreWrittenInCanonicalForm) {
  const ResolvedDeck deck = parse_deck(
      "[optim]\nlr = 0.00060\nmin_lr = -0\nbeta2 = +.999\nweight_decay = 1.0e-1\n"
      "[train]\nsteps = +007\n",
      "d.ini", {"--parallel.bucket_mb=2e6"});
  EXPECT_EQ(deck.value("optim.lr"), "6e-4");
  EXPECT_EQ(deck.value("optim.min_lr"), "0");
  EXPECT_EQ(deck.value("optim.beta2"), "0.999");
  EXPECT_EQ(deck.value("optim.weight_decay"), "0.1");
  EXPECT_EQ(deck.value("train.steps"), "7");
  EXPECT_EQ(deck.value("parallel.bucket_mb"), "2e6");
}

TEST(DeckParse, WrittenDeckReadsBackIdentical) {
  const ResolvedDeck original = parse_deck(
      "[run]\ndir = runs/first try\nseed = 7\ndevice = auto\n"
      "[model]\nlayers = 2\nheads = 4\nhidden = 64\n"
      "[data]\npath = /tmp/tokens.h5\ngenerate = synthetic\nval_fraction = 0.125\n"
      "[optim]\nlr = 0.0003\nmin_lr = 3.3e-5\neps = 1e-10\n",
      "d.ini", {"--train.steps=20", "--log.peak_tflops", "1.5"});
  const ResolvedDeck reread = parse_deck(original.to_ini(), "config.ini", {});
  EXPECT_EQ(reread.entries(), original.entries());
  EXPECT_EQ(reread.to_ini(), original.to_ini());
  EXPECT_EQ(reread.value("run.dir"), "runs/first try");
}

TEST(DeckParse, WrittenDeckHasHeaderSectionsAndDescriptions) {
  const std::string ini = parse_deck("", "d.ini", {}).to_ini();
  EXPECT_EQ(ini.rfind("# Resolved Trident deck: `trident train config.ini --run.dir=NEW` reproduces this run", 0),
            0u);
  EXPECT_NE(ini.find("\n[train]\n"), std::string::npos);
  EXPECT_NE(ini.find("# Optimizer steps to run.\nsteps = 100\n"), std::string::npos) << ini;
}

TEST(DeckParse, SetReplacesOneValueCanonically) {
  ResolvedDeck deck = parse_deck("", "d.ini", {});
  deck.set("parallel.dp", "+2");
  EXPECT_EQ(deck.value("parallel.dp"), "2");
  EXPECT_THROW(deck.set("parallel.dpp", "2"), std::out_of_range);
  EXPECT_THROW(deck.set("parallel.dp", "-2"), UserError);
  EXPECT_THROW((void)deck.value("no.such_key"), std::out_of_range);
}

class DeckFile : public ::testing::Test {
 protected:
  std::filesystem::path directory_ =
      std::filesystem::path(::testing::TempDir()) / "trident_deck_file_test";
  void SetUp() override { std::filesystem::create_directories(directory_); }
  void TearDown() override { std::filesystem::remove_all(directory_); }
};

TEST_F(DeckFile, MissingFileNamesThePathAndTheReason) {
  const std::string path = (directory_ / "nope.ini").string();
  EXPECT_EQ(user_error_of([&] { read_deck_file(path); }),
            "deck '" + path + "': cannot read (No such file or directory)");
}

TEST_F(DeckFile, DirectoryIsNotADeck) {
  const std::string path = directory_.string();
  EXPECT_EQ(user_error_of([&] { read_deck_file(path); }),
            "deck '" + path + "': cannot read (Is a directory)");
}

TEST_F(DeckFile, FileIsReadWholeAndEmptyFileIsAllDefaults) {
  const std::filesystem::path deck_path = directory_ / "small.ini";
  std::ofstream(deck_path) << "[train]\nsteps = 3\n";
  EXPECT_EQ(read_deck_file(deck_path.string()), "[train]\nsteps = 3\n");

  const std::filesystem::path empty_path = directory_ / "empty.ini";
  std::ofstream{empty_path};
  const std::string empty = read_deck_file(empty_path.string());
  EXPECT_EQ(empty, "");
  EXPECT_EQ(parse_deck(empty, empty_path.string(), {}).value("train.steps"), "100");
}

}  // namespace
}  // namespace trident::io
